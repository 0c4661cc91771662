/**
 * Embedded API server scale check, against a ceiling measured in the same run.
 *
 * Every piece is its own process so nobody's event loop is the bottleneck but
 * the server's: the server (bench/apiserver-child.ts, or the bare fan-out
 * ceiling bench/apiserver-ceiling.ts), one watcher process holding 10 watches
 * and one writer process (bench/apiserver-load.ts). Phases:
 *   1. 10,000 creates (32 concurrent writers) — the object count.
 *   2. paced: open-loop merge patches at 500 writes/s for 6 s while 10 watchers
 *      measure delivery latency from each write's send stamp.
 *   3. sustained: 10,000 patches, 32 concurrent writers, 10 watchers open.
 * The ceiling runs 2 and 3 only (it stores nothing).
 *
 * Run: node --import tsx bench/apiserver.ts [--rate 500] [--seconds 6] [--profile DIR]
 * (--profile starts the server child with --cpu-prof into DIR).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: {
  rate: { type: 'string', default: '500' }, seconds: { type: 'string', default: '6' },
  profile: { type: 'string' }, 'skip-ceiling': { type: 'boolean', default: false },
} });
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const OBJECTS = 10_000;
const WATCHERS = 10;
const here = (f: string): string => fileURLToPath(new URL(f, import.meta.url));

interface Proc { child: ChildProcess; lines: AsyncIterableIterator<string> }
function start(file: string, args: string[], nodeFlags: string[] = []): Proc {
  const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', here(file), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  return { child, lines: createInterface({ input: child.stdout! })[Symbol.asyncIterator]() };
}
async function nextLine(p: Proc): Promise<string> {
  const r = await p.lines.next();
  if (r.done) throw new Error('child exited early');
  return r.value;
}
async function stop(p: Proc): Promise<string | undefined> {
  const out = p.lines.next();
  p.child.kill('SIGTERM');
  const [r] = await Promise.all([out, once(p.child, 'exit')]);
  return r.done ? undefined : r.value;
}
async function writer(url: string, token: string, kind: string, n: number, rate = 0): Promise<Record<string, unknown>> {
  const w = start('./apiserver-load.ts', ['writer', url, token, kind, String(n), String(rate)]);
  const line = await nextLine(w);
  await once(w.child, 'exit');
  return JSON.parse(line) as Record<string, unknown>;
}
async function currentRv(url: string, token: string): Promise<string> {
  if (token === 'none') return '0';
  const r = await fetch(`${url}/api/v1/namespaces/default/configmaps?limit=1`, { headers: { Authorization: `Bearer ${token}` } });
  return ((await r.json()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
}

async function run(server: string, nodeFlags: string[], seed: boolean): Promise<Record<string, unknown>> {
  const srv = start(server, [], nodeFlags);
  const { url, token } = JSON.parse(await nextLine(srv)) as { url: string; token: string };
  try {
    const out: Record<string, unknown> = {};
    if (seed) out['create10k'] = await writer(url, token, 'create', OBJECTS);
    const watchers = start('./apiserver-load.ts', ['watchers', url, token, String(WATCHERS), await currentRv(url, token)]);
    await nextLine(watchers);
    const paced = await writer(url, token, 'paced', RATE * SECONDS, RATE);
    // Let in-flight events arrive (the figure we want is latency, not a cut-off).
    await new Promise((r) => setTimeout(r, 500));
    out['paced'] = { targetRate: RATE, ...paced, ...(JSON.parse((await stop(watchers)) ?? '{}') as Record<string, unknown>) };
    const w2 = start('./apiserver-load.ts', ['watchers', url, token, String(WATCHERS), await currentRv(url, token)]);
    await nextLine(w2);
    out['sustained'] = { ...(await writer(url, token, 'closed', OBJECTS)), ...(JSON.parse((await stop(w2)) ?? '{}') as Record<string, unknown>) };
    return out;
  } finally {
    await stop(srv);
  }
}

const profile = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${values.profile}`] : [];
const apiserver = await run('./apiserver-child.ts', profile, true);
const ceiling = values['skip-ceiling'] ? undefined : await run('./apiserver-ceiling.ts', [], false);
const rate = (o: Record<string, unknown> | undefined, k: string): number => Number((o?.[k] as { writesPerSec?: number } | undefined)?.writesPerSec ?? NaN);
console.log(JSON.stringify({
  objects: OBJECTS, watchers: WATCHERS, apiserver, ceiling,
  ratioToCeiling: ceiling ? {
    sustainedWrites: Number((rate(apiserver, 'sustained') / rate(ceiling, 'sustained')).toFixed(2)),
    pacedP99Delivery: Number((((apiserver['paced'] as { delivery: { p99Ms: number } }).delivery.p99Ms) /
      ((ceiling['paced'] as { delivery: { p99Ms: number } }).delivery.p99Ms)).toFixed(2)),
  } : undefined,
}, null, 2));
