// The RE2 wrapper (src/policy/re2.ts): literal patterns take a string-method
// fast path that must answer exactly as RE2 does; the limits hold.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { RE2JS } from 're2js';
import { requiredSubstring } from '../../src/policy/regex-required.ts';
import { compileLinear, MAX_PROGRAM_SIZE, MAX_TEST_COST, newRegexClock, RegexLimitError, withDeadline } from '../../src/policy/index.ts';

describe('compileLinear', () => {
  it('literal patterns (anchored or not, with escaped punctuation) answer exactly like RE2', () => {
    const piece = fc.oneof(
      fc.constantFrom('a', 'b', '/', ':', '-', 'é', '😀', '_'),
      fc.constantFrom('\\.', '\\$', '\\^', '\\\\', '\\/', '\\-', '\\*', '\\(', '\\[', '\\{', '\\|'),
    );
    const pattern = fc.tuple(fc.boolean(), fc.array(piece, { maxLength: 6 }), fc.boolean()).map(([s, body, e]) => `${s ? '^' : ''}${body.join('')}${e ? '$' : ''}`);
    const input = fc.array(fc.constantFrom('a', 'b', '/', ':', '-', 'é', '😀', '.', '$', '^', '\\', '*', '(', '[', '{', '|', '_'), { maxLength: 10 }).map((a) => a.join(''));
    fc.assert(
      fc.property(pattern, input, (p, s) => {
        assert.equal(compileLinear(p).test(s), RE2JS.compile(p).test(s), `/${p}/ on ${JSON.stringify(s)}`);
      }),
      { numRuns: 3000 },
    );
  });

  it('a pattern with a required literal answers exactly like RE2, with and without it in the input', () => {
    // Atoms of every kind the prefilter reads (regex-required.ts), so that a
    // wrong "required" run (a literal inside an optional or alternated part)
    // shows as a missed match.
    const atom = fc.oneof(
      fc.constantFrom('a', 'b', ':', '@', '/', '-', 'é', '😀', '{', '}'),
      fc.constantFrom('\\.', '\\d', '\\w', '\\b', '\\/', '\\{', '\\|', '\\x{61}', '\\pL', '\\Qa|b\\E'),
      fc.constantFrom('[ab]', '[^:]', '[]a]', '[a\\]]', '[[:alpha:]]', '.', '^', '$'),
      fc.constantFrom('(a|b)', '(?:ab)?', '(a(b))', '(?i:a)', '(?i)', '(?P<n>a)', '(:|@)', '([)])'),
    );
    const quantifier = fc.constantFrom('', '', '', '*', '+', '?', '{2}', '{0,2}', '{1,}', '+?', '*?', '{0}');
    const pattern = fc.array(fc.tuple(atom, quantifier), { maxLength: 6 }).chain((parts) =>
      fc.constantFrom('', '|a', '|', 'b|').map((alt) => parts.map(([a, q]) => a + q).join('') + alt),
    );
    const input = fc.array(fc.constantFrom('a', 'b', 'A', ':', '@', '/', '-', 'é', '😀', '.', '{', '}', '|', '1', ' '), { maxLength: 12 }).map((a) => a.join(''));
    let compared = 0;
    fc.assert(
      fc.property(pattern, input, (p, s) => {
        let expected: boolean;
        try {
          expected = RE2JS.compile(p).test(s);
        } catch {
          return; // not a pattern RE2 accepts
        }
        compared++;
        assert.equal(compileLinear(p, { ecmaEscapes: false }).test(s), expected, `/${p}/ on ${JSON.stringify(s)}`);
      }),
      { numRuns: 5000 },
    );
    assert.ok(compared > 2500, `only ${compared} generated patterns compiled`);
  });

  it('a remembering pattern answers like RE2 on every input, repeated or not, short or long', () => {
    // One compiled pattern across the whole run: its memo fills, empties and
    // fills again, and is never consulted for inputs over its length bound.
    const re = compileLinear(':[^/:@]+$', { memoize: true });
    const rx = RE2JS.compile(':[^/:@]+$');
    const image = fc.oneof(
      fc.constantFrom('nginx:1.25', 'nginx', 'reg.example/a/b:latest', 'a@sha256:00', 'x:y/z', ''),
      fc.string({ unit: fc.constantFrom('a', ':', '/', '@', '.'), maxLength: 40 }),
      fc.string({ unit: fc.constantFrom('a', ':', '/'), minLength: 120, maxLength: 140 }),
    );
    fc.assert(
      fc.property(fc.array(image, { minLength: 1, maxLength: 80 }), (inputs) => {
        for (const s of [...inputs, ...inputs]) assert.equal(re.test(s), rx.test(s), JSON.stringify(s));
      }),
      { numRuns: 300 },
    );
  });

  it('finds the literal every match needs, and none where a match can do without', () => {
    assert.equal(requiredSubstring('@[A-Za-z][A-Za-z0-9]*:[0-9A-Fa-f]{32,}$'), '@');
    assert.equal(requiredSubstring(':[^/:@]+$'), ':');
    assert.equal(requiredSubstring('^[a-z]+\\.kubernetes\\.io/'), '.kubernetes.io/');
    assert.equal(requiredSubstring('ab+c'), 'ab');
    assert.equal(requiredSubstring('x?abc'), 'abc');
    for (const none of ['a|b', '(?i)abc', 'a*', 'a{0,3}', '[abc]', '(abc)', '\\x{61}bc', '']) {
      assert.equal(requiredSubstring(none), undefined, none);
    }
  });

  it('keys ajv caches by are distinct per pattern', () => {
    assert.notEqual(compileLinear('^a$').toString(), compileLinear('^b$').toString());
  });

  it('program size and per-test cost limits are enforced before running', () => {
    assert.throws(() => compileLinear('[a-z]{1000}[a-z]{1000}[a-z]{1000}'), (e: unknown) => e instanceof RegexLimitError && /more than the 2000 allowed/.test(e.message));
    const re = compileLinear('[a-z]{100}x');
    assert.ok(re.programSize <= MAX_PROGRAM_SIZE);
    const over = Math.ceil(MAX_TEST_COST / re.programSize) + 1;
    assert.throws(() => re.test('a'.repeat(over)), /exceeds the matching budget/);
    assert.equal(re.test('a'.repeat(1000)), false);
  });

  it('inside withDeadline, a test after the deadline throws; outside, nothing changes', () => {
    const clock = newRegexClock();
    const re = compileLinear('^a+$', { clock });
    // Large enough (programSize × length ≥ 2^16 units) that the clock is read before it runs.
    const long = 'a'.repeat(Math.ceil(2 ** 16 / re.programSize));
    let t = 0;
    const now = (): number => t;
    withDeadline(clock, 10, now, () => {
      assert.equal(re.test(long), true);
      t = 11;
      assert.throws(() => re.test(long), /time budget ran out/);
    });
    assert.equal(re.test(long), true);
  });

  it('tiny tests read the clock only once their work adds up to 2^16 units', () => {
    const clock = newRegexClock();
    const re = compileLinear('^a+$', { clock });
    let reads = 0;
    const now = (): number => {
      reads++;
      return 0;
    };
    withDeadline(clock, 10, now, () => {
      for (let i = 0; i < 1000; i++) re.test('aaaa');
    });
    const perTest = re.programSize * 4;
    assert.equal(reads, Math.floor((1000 * perTest) / 2 ** 16));
  });
});
