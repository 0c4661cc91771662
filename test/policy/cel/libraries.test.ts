/**
 * The Kubernetes CEL libraries, with examples from the Kubernetes
 * documentation ("CEL in Kubernetes", library reference).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compile, evaluate } from '../../../src/policy/cel/index.ts';

function value(expr: string, object: unknown = {}): unknown {
  const p = compile(expr, { resultType: 'any' });
  if (!p.ok) assert.fail(`${expr}: ${p.message} at ${JSON.stringify(p.position)}`);
  const r = evaluate(p, { object });
  if (!r.ok) assert.fail(`${expr}: ${r.kind}: ${r.message}`);
  return r.value;
}

function fails(expr: string, re: RegExp): void {
  const p = compile(expr, { resultType: 'any' });
  if (!p.ok) assert.fail(`${expr}: ${p.message}`);
  const r = evaluate(p, {});
  assert.equal(r.ok, false, `${expr} should fail`);
  if (!r.ok) assert.match(r.message, re);
}

function table(name: string, rows: [string, unknown][]): void {
  describe(name, () => {
    for (const [expr, want] of rows) it(expr, () => assert.deepEqual(value(expr), want));
  });
}

table('strings extension', [
  ["'hello'.charAt(1)", 'e'],
  ["'hello mellow'.indexOf('ello')", 1n],
  ["'hello mellow'.lastIndexOf('ello')", 7n],
  ["'TacoCat'.lowerAscii()", 'tacocat'],
  ["'TacoCat'.upperAscii()", 'TACOCAT'],
  ["'hello hello'.replace('he', 'we')", 'wello wello'],
  ["'hello hello'.replace('he', 'we', 1)", 'wello hello'],
  // Go's strings.Replace: an empty pattern matches around every code point; `$` is not special; limits count.
  ["'abc'.replace('', '-')", '-a-b-c-'],
  ["'abc'.replace('', '-', 2)", '-a-bc'],
  ["'aaa'.replace('a', '$&', 2)", '$&$&a'],
  ["'abab'.replace('ab', 'x', 5)", 'xx'],
  ["'abcabc'.replace('b', 'X', 0)", 'abcabc'],
  ["'a,b,c'.split(',')", ['a', 'b', 'c']],
  ["'tacocat'.substring(4)", 'cat'],
  ["'  \\ttrim\\n '.trim()", 'trim'],
  ["['hello', 'mellow'].join(' ')", 'hello mellow'],
  ["strings.quote('single-quote with \"double quote\"')", '"single-quote with \\"double quote\\""'],
  ["'%s has %d items, %.2f full'.format(['cart', 3, 0.5])", 'cart has 3 items, 0.50 full'],
]);

table('lists library', [
  ['[1, 2, 3].isSorted()', true],
  ['[3, 1].isSorted()', false],
  ['[1, 2, 3].sum()', 6n],
  ['[1.5, 2.5].sum()', 4],
  ['[1, 2, 3].min()', 1n],
  ["['a', 'c', 'b'].max()", 'c'],
  ['[1, 2, 2, 3].indexOf(2)', 1n],
  ['[1, 2, 2, 3].lastIndexOf(2)', 2n],
  ['[1, 2].indexOf(9)', -1n],
]);

table('regex library', [
  ["'abc 123'.find('[0-9]+')", '123'],
  ["'abc'.find('[0-9]+')", ''],
  ["'123 abc 456'.findAll('[0-9]+')", ['123', '456']],
  ["'123 abc 456'.findAll('[0-9]+', 1)", ['123']],
]);

table('sets extension', [
  ['sets.contains([1, 2, 3], [2, 3])', true],
  ['sets.contains([1], [2])', false],
  ['sets.equivalent([1, 2], [2, 1, 1])', true],
  ['sets.intersects([1, 2], [2, 5])', true],
  ['sets.intersects([1], [5])', false],
]);

table('base64', [
  ["base64.encode(b'hello')", 'aGVsbG8='],
  ["string(base64.decode('aGVsbG8='))", 'hello'],
]);

table('URL library', [
  ["url('https://example.com:80/path?query=val#fragment').getScheme()", 'https'],
  ["url('https://example.com:80/').getHost()", 'example.com:80'],
  ["url('https://[::1]:80/').getHostname()", '::1'],
  ["url('https://example.com:80/').getPort()", '80'],
  ["url('https://example.com/path with spaces/').getEscapedPath()", '/path%20with%20spaces/'],
  ["url('https://example.com/?k=a&k=b&j=c').getQuery()['k']", ['a', 'b']],
  ["isURL('https://example.com/')", true],
  ["isURL('/absolute-path')", true],
  ["isURL('relative/path')", false],
]);

table('quantity library', [
  ["quantity('1.5G').isGreaterThan(quantity('1Gi'))", true],
  ["quantity('500m').isInteger()", false],
  ["quantity('2Ki').asInteger()", 2048n],
  ["quantity('50k').asApproximateFloat()", 50000],
  ["quantity('-1').sign()", -1n],
  ["quantity('1Gi').compareTo(quantity('1024Mi'))", 0n],
  ["quantity('1').add(quantity('500m')).isLessThan(quantity('2'))", true],
  ["quantity('10').sub(3).asInteger()", 7n],
  ["isQuantity('1.3e3')", true],
  ["isQuantity('1.3x')", false],
]);

table('IP and CIDR libraries', [
  ["ip('127.0.0.1').family()", 4n],
  ["ip('::1').isLoopback()", true],
  ["ip('0.0.0.0').isUnspecified()", true],
  ["ip('fe80::1').isLinkLocalUnicast()", true],
  ["ip('224.0.0.1').isLinkLocalMulticast()", true],
  ["ip('8.8.8.8').isGlobalUnicast()", true],
  ["isIP('010.0.0.1')", false],
  ["isIP('::ffff:1.2.3.4')", false],
  ["ip.isCanonical('2001:db8::abcd')", true],
  ["ip.isCanonical('2001:DB8::ABCD')", false],
  ["string(ip('2001:db8:0:0:0:0:0:1'))", '2001:db8::1'],
  ["cidr('192.168.0.0/16').containsIP(ip('192.168.10.1'))", true],
  ["cidr('192.168.0.0/16').containsIP('10.0.0.1')", false],
  ["cidr('192.168.0.0/16').containsCIDR('192.168.1.0/24')", true],
  ["cidr('192.168.1.0/24').containsCIDR(cidr('192.168.0.0/16'))", false],
  ["cidr('192.168.1.5/24').prefixLength()", 24n],
  ["string(cidr('192.168.1.5/24').masked())", '192.168.1.0/24'],
  ["string(cidr('192.168.1.5/24').ip())", '192.168.1.5'],
  ["isCIDR('10.0.0.0/33')", false],
]);

table('semver library', [
  ["semver('1.2.3').major()", 1n],
  ["semver('1.2.3').minor() + semver('1.2.3').patch()", 5n],
  ["semver('1.2.3').isGreaterThan(semver('1.2.3-alpha'))", true],
  ["semver('1.0.0-alpha.1').isLessThan(semver('1.0.0-alpha.beta'))", true],
  ["semver('1.10.0').compareTo(semver('1.9.0'))", 1n],
  ["isSemver('v1.0')", false],
  ["isSemver('v1.0', true)", true],
  ["isSemver('01.2.3')", false],
]);

table('format library', [
  ["format.dns1123Label().validate('my-name').hasValue()", false],
  ["format.dns1123Label().validate('My_Name').hasValue()", true],
  ["format.named('dns1123Subdomain').value().validate('example.com').hasValue()", false],
  ["format.named('nope').hasValue()", false],
  ["format.qualifiedName().validate('example.com/MyName').hasValue()", false],
  ["format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()", false],
]);

table('two-variable comprehensions', [
  ['[1, 2, 3].all(i, v, v > i)', true],
  ["{'a': 1, 'b': 2}.all(k, v, v > 0 && k != '')", true],
  ["{'a': 1, 'b': 0}.exists(k, v, v == 0 && k == 'b')", true],
  ['[1, 2, 2].existsOne(i, v, v == 2)', false],
  ['[1, 2, 3].transformList(i, v, v * 2)', [2n, 4n, 6n]],
  ['[1, 2, 3].transformList(i, v, i > 0, v * 2)', [4n, 6n]],
  ["{'a': 1}.transformMap(k, v, v + 1)", { a: 2n }],
  ["{'a': 1, 'b': 2}.transformMap(k, v, v > 1, v)", { b: 2n }],
  ["{'a': 1}.transformMapEntry(k, v, {k + 'x': v})", { ax: 1n }],
  ['[0, 1].all(i, v, 1 / v > 0) || true', true],
]);

describe('library errors are evaluation errors', () => {
  it('invalid inputs say what is wrong', () => {
    fails("quantity('1.3x')", /quantities must match/);
    fails("ip('999.1.1.1')", /IP Address/);
    fails("semver('x')", /invalid semver/);
    fails("url('rel')", /not a valid absolute URL/);
    fails('[].max()', /empty list/);
    fails('[0, 1].all(i, v, 1 / v > 0)', /division by zero/);
  });

  it('a comprehension variable named like a namespace still works', () => {
    assert.equal(value("['10.0.0.1'].all(ip, ip.startsWith('10.'))"), true);
    assert.equal(value("['a'].all(format, format.size() == 1)"), true);
  });

  it('namespaced names inside string literals are left alone', () => {
    assert.equal(value("'sets.contains(x)'"), 'sets.contains(x)');
  });
});
