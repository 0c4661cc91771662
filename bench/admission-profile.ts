/**
 * Reads the CPU profiles written by `bench/admission.ts --cpu-prof DIR` and
 * prints self time by function for the ceiling, portal and the cluster-mode
 * replica (when profiled) side by side,
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

/** Self time (µs) per "function file" of one main-thread profile. */
function selfTimesOf(file: string): { byFunction: Map<string, number>; busy: number } {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const byFunction = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    const frame = frames.get(id);
    const name = frame?.functionName || '(anonymous)';
    const dt = profile.timeDeltas[i] ?? 0;
    if (IDLE.has(name)) return;
    const url = (frame?.url ?? '').replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(src|bench)\//, '$1/').replace(/^file:\/\/.*?\/\.bench-dist-[^/]+\//, 'dist/');
    const key = url ? `${name} ${url}` : name;
    byFunction.set(key, (byFunction.get(key) ?? 0) + dt);
    busy += dt;
  });
  return { byFunction, busy };
}

/**
 * The main-thread profile in DIR/side. The cluster side's directory also
 * holds `portal dev`'s own profile (NODE_OPTIONS reaches both processes):
 * the replica under load is the busiest one.
 */
function selfTimes(side: string): { byFunction: Map<string, number>; busy: number } | undefined {
  let files: string[];
  try {
    files = readdirSync(join(dir as string, side)).filter((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f));
  } catch {
    return undefined;
  }
  if (files.length === 0) throw new Error(`no main-thread profile in ${side}`);
  return files.map((f) => selfTimesOf(join(dir as string, side, f))).sort((a, b) => b.busy - a.busy)[0];
}

const sides = ['ceiling', 'portal', 'cluster'].flatMap((side) => {
  const t = selfTimes(side);
  return t ? [{ side, ...t }] : [];
});
const pct = (t: number | undefined, busy: number): string => `${((100 * (t ?? 0)) / busy).toFixed(1)}%`.padStart(7);
const keys = [...new Set(sides.flatMap((s) => [...s.byFunction.keys()]))];
const share = (k: string): number => Math.max(...sides.map((s) => (s.byFunction.get(k) ?? 0) / s.busy));
keys.sort((a, b) => share(b) - share(a));
process.stdout.write(`busy ms: ${sides.map((s) => `${s.side} ${(s.busy / 1000).toFixed(0)}`).join(', ')} (start-up included)\n`);
process.stdout.write(`${sides.map((s) => s.side.padStart(7)).join(' ')}  function\n`);
for (const k of keys.slice(0, TOP)) {
  process.stdout.write(`${sides.map((s) => pct(s.byFunction.get(k), s.busy)).join(' ')}  ${k}\n`);
}
