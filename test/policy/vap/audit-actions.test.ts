/** The policies.portal.dev/audit-actions annotation of a VAP (docs/design.md §8). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AUDIT_ACTIONS_ANNOTATION, parseAuditActions } from '../../../src/policy/vap/index.ts';

const parse = (v: string): ReturnType<typeof parseAuditActions> => parseAuditActions({ [AUDIT_ACTIONS_ANNOTATION]: v });

void describe('audit-actions annotation', () => {
  void it('absent or empty: no actions', () => {
    assert.deepEqual(parseAuditActions(undefined), { ok: true, actions: [] });
    assert.deepEqual(parseAuditActions({}), { ok: true, actions: [] });
  });

  void it('the same action objects as audit.actions', () => {
    assert.deepEqual(parse('[{"type":"label","key":"portal.dev/violation","value":"pss"},{"type":"alert"},{"type":"evict"}]'), {
      ok: true,
      actions: [{ type: 'label', key: 'portal.dev/violation', value: 'pss' }, { type: 'alert' }, { type: 'evict' }],
    });
  });

  void it('reports every problem, and gives no actions then', () => {
    assert.deepEqual(parse('{"type":"alert"}'), { ok: false, problems: [`${AUDIT_ACTIONS_ANNOTATION}: must be a JSON list of actions, e.g. [{"type":"alert"}]`] });
    assert.match((parse('[{type: alert}]') as { problems: string[] }).problems[0] ?? '', /not JSON/);
    const r = parse('[{"type":"page"},{"type":"label"},{"type":"label","key":"bad key","value":"x"},{"type":"alert","key":"k","colour":"red"}]');
    assert.equal(r.ok, false);
    assert.deepEqual(!r.ok && r.problems.map((p) => p.replace(`${AUDIT_ACTIONS_ANNOTATION}`, 'A')), [
      'A[0].type: must be one of "label", "annotate", "evict", "alert"',
      'A[1].key: required for label',
      'A[2].key: label key "bad key": the name must be 1-63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric',
      'A[3]: unknown field "colour"; actions have type, key and value',
      'A[3]: alert takes no key or value',
    ]);
  });
});
