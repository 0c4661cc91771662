// Its own file: it counts the process's listening servers, which other
// tests' servers (still closing) would disturb.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { startApiServer } from '../../packages/devcluster/src/apiserver/index.ts';

// issue 11 item 7: a taken port made `portal dev` print EADDRINUSE and hang,
// because the internal TLS relay server stayed listening.
void test('startApiServer on a taken port rejects with one actionable line and leaves nothing listening', async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', () => resolve()));
  const port = (taken.address() as { port: number }).port;
  const servers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'TCPServerWrap').length;
  const before = servers();
  try {
    for (const plainHttp of [true, false]) {
      await assert.rejects(startApiServer({ port, plainHttp }), {
        name: 'PortalError',
        message: `port ${port} on 127.0.0.1 is already in use: stop what listens there, or pass --port with another port (0 picks a free one)`,
      });
      // A failed listen releases its handle a moment later; a leaked server never does.
      const deadline = Date.now() + 2000;
      while (servers() !== before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      assert.equal(servers(), before, `no server left listening (plainHttp ${plainHttp}): ${JSON.stringify(process.getActiveResourcesInfo())}`);
    }
  } finally {
    taken.close();
  }
});
