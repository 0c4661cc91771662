/**
 * Reads the CPU profiles written by `bench/admission.ts --cpu-prof DIR` and
 * prints self time by function for the ceiling and for portal side by side,
 * as a share of each process's busy (non-idle) time, largest first. What
 * portal spends that the ceiling does not is the gap to work on.
 *
 * Run: node --import tsx bench/admission-profile.ts DIR [--top 40]
 * Only each process's main thread is read (tid 0 in the file name: the
 * other profile is tsx's loader thread, idle after start-up).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
}

const dir = process.argv[2];
if (!dir) throw new Error('usage: admission-profile.ts DIR [--top N]');
const topAt = process.argv.indexOf('--top');
const TOP = topAt > 0 ? Number(process.argv[topAt + 1]) : 40;
const IDLE = new Set(['(idle)', '(program)']);

/** Self time (µs) per "function file" of the main-thread profile in DIR/side. */
function selfTimes(side: string): { byFunction: Map<string, number>; busy: number } {
  const files = readdirSync(join(dir as string, side)).filter((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f));
  if (files.length !== 1) throw new Error(`expected one main-thread profile in ${side}, found ${files.length}`);
  const profile = JSON.parse(readFileSync(join(dir as string, side, files[0] as string), 'utf8')) as CpuProfile;
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const byFunction = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    const frame = frames.get(id);
    const name = frame?.functionName || '(anonymous)';
    const dt = profile.timeDeltas[i] ?? 0;
    if (IDLE.has(name)) return;
    const url = (frame?.url ?? '').replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(src|bench)\//, '$1/');
    const key = url ? `${name} ${url}` : name;
    byFunction.set(key, (byFunction.get(key) ?? 0) + dt);
    busy += dt;
  });
  return { byFunction, busy };
}

const ceiling = selfTimes('ceiling');
const portal = selfTimes('portal');
const pct = (t: number | undefined, busy: number): string => `${((100 * (t ?? 0)) / busy).toFixed(1)}%`.padStart(7);
const keys = [...new Set([...ceiling.byFunction.keys(), ...portal.byFunction.keys()])];
const share = (k: string): number => Math.max((ceiling.byFunction.get(k) ?? 0) / ceiling.busy, (portal.byFunction.get(k) ?? 0) / portal.busy);
keys.sort((a, b) => share(b) - share(a));
process.stdout.write(`busy ms: ceiling ${(ceiling.busy / 1000).toFixed(0)}, portal ${(portal.busy / 1000).toFixed(0)} (start-up included)\n`);
process.stdout.write(`${'ceiling'.padStart(7)} ${'portal'.padStart(7)}  function\n`);
for (const k of keys.slice(0, TOP)) {
  process.stdout.write(`${pct(ceiling.byFunction.get(k), ceiling.busy)} ${pct(portal.byFunction.get(k), portal.busy)}  ${k}\n`);
}
