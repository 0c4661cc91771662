/** Child process of bench/apiserver.ts: the server runs alone on its event loop, as in `portal dev`. */
import { startApiServer } from '../packages/devcluster/src/apiserver/index.ts';

const api = await startApiServer({ historyLimit: 20_000 });
const token = api.addUser('bench');
process.stdout.write(`${JSON.stringify({ url: api.url, token })}\n`);
// Exit through process.exit so --cpu-prof writes its profile.
process.on('SIGTERM', () => void api.close().then(() => process.exit(0)));
