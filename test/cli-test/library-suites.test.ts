/**
 * The suites the shipped libraries carry (policies/<library>/tests/, written
 * by test/pss/generate-library-suites.ts from the fixtures), run as a user's
 * CI would: the real `portal test` binary over policies/, --strict, with a
 * JUnit report. And the suites living beside the rules do not disturb the
 * loaders that read those directories.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { parse } from 'yaml';
import { loadRulesFromDirectory } from '../../src/sources/rule-files.ts';
import { ROOT, runPortal } from './run-portal.ts';

let tmp = '';
before(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'portal-library-suites-'));
});
after(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const SUITES = [
  'policies/best-practices/tests/best-practices.portal-test.yaml',
  'policies/pod-security-vap/tests/pod-security-vap.portal-test.yaml',
  'policies/pod-security/tests/pod-security-v1.30.portal-test.yaml',
  'policies/pod-security/tests/pod-security.portal-test.yaml',
];

void describe('the shipped libraries carry suites', () => {
  void it('portal test --strict --junit FILE policies/: every suite passes, every verdict is named', async () => {
    const junit = join(tmp, 'junit.xml');
    // ~9,000 expectations over 4 suites: ~6 s on an idle machine; generous for a loaded one.
    const r = await runPortal(['test', '--strict', '--junit', junit, 'policies/'], { cwd: ROOT, timeoutMs: 240_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.equal(r.stderr, '');
    assert.deepEqual(
      r.stdout.split('\n').filter((l) => /^(PASS|FAIL|ERROR) /.test(l)).map((l) => l.replace(/ \(.*$/, '')),
      SUITES.map((s) => `PASS ${s}`),
    );
    const summary = /^4 suites; ([\d,]+) expectations: ([\d,]+) held, 0 failed; 0 verdicts not named by any expectation$/m.exec(r.stdout);
    assert.ok(summary, r.stdout);
    const xml = await readFile(junit, 'utf8');
    assert.equal(XMLValidator.validate(xml), true);
    const doc = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '', isArray: (n) => n === 'testsuite' || n === 'testcase' }).parse(xml) as {
      testsuites: { tests: string; failures: string; testsuite: { file: string; tests: string; testcase: unknown[] }[] };
    };
    assert.deepEqual(doc.testsuites.testsuite.map((s) => s.file), SUITES);
    const cases = doc.testsuites.testsuite.reduce((n, s) => n + s.testcase.length, 0);
    assert.equal(String(cases), summary[1]?.replace(/,/g, ''));
    assert.equal(doc.testsuites.tests, String(cases));
    assert.equal(doc.testsuites.failures, '0');
  });

  void it('schemas/portal-test.schema.json is a valid draft-07 schema, and every shipped suite matches it', async () => {
    const schema = JSON.parse(await readFile(join(ROOT, 'schemas', 'portal-test.schema.json'), 'utf8')) as object;
    // What an editor does with it: a plain ajv, no Portal code in between.
    const ajv = new Ajv({ allErrors: true, strict: true });
    assert.equal(ajv.validateSchema(schema), true, JSON.stringify(ajv.errors));
    const validate = ajv.compile(schema);
    for (const file of SUITES) {
      const ok = validate(parse(await readFile(join(ROOT, file), 'utf8')));
      assert.ok(ok, `${file}: ${JSON.stringify(validate.errors)}`);
    }
  });

  void it('rule loaders skip the suites beside the rules', async () => {
    for (const [dir, rules, vaps] of [
      ['pod-security', 19, 0],
      ['pod-security-vap', 0, 19],
      ['best-practices', 3, 0],
    ] as const) {
      const loaded = await loadRulesFromDirectory(join(ROOT, 'policies', dir));
      assert.deepEqual(loaded.errors, [], dir);
      assert.equal(loaded.rules.length, rules, dir);
      assert.equal(loaded.vap.policies.length, vaps, dir);
    }
  });
});
