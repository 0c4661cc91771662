// GET /_portal/requests: every authenticated request by user, reads and
// watches included (the audit log has writes only); admin token only.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { caller, withServer } from './helpers.ts';

test('/_portal/requests counts reads, writes and opened watches per user', async () => {
  await withServer({}, async (s) => {
    const alice = caller(s, s.addUser('alice', ['system:masters']));
    const admin = caller(s, s.adminToken);
    const cms = '/api/v1/namespaces/default/configmaps';
    assert.equal((await alice('POST', cms, { metadata: { name: 'c' }, data: { a: '1' } })).status, 201);
    assert.equal((await alice('GET', `${cms}/c`)).status, 200);
    assert.equal((await alice('GET', `${cms}/c`)).status, 200);
    const ac = new AbortController();
    const watch = await fetch(`${s.url}${cms}?watch=true`, { headers: { Authorization: `Bearer ${s.addUser('bob', ['system:masters'])}` }, signal: ac.signal });
    assert.equal(watch.status, 200);
    ac.abort();
    const counts = (await admin('GET', '/_portal/requests')).body as Record<string, Record<string, number>>;
    assert.deepEqual(counts['alice'], { [`POST ${cms}`]: 1, [`GET ${cms}/c`]: 2 });
    assert.deepEqual(counts['bob'], { [`WATCH ${cms}`]: 1 });
    assert.equal(counts['admin'], undefined, 'side API calls are not counted');
    assert.equal((await alice('GET', '/_portal/requests')).status, 403);
  });
});
