/**
 * Suites benchmark (issue 17): `portal test` running the suite shipped with
 * the VAP library (policies/pod-security-vap/tests/, every verdict of the 19
 * controls on the ~176 fixtures of test/fixtures/pss named: ~3,000
 * expectations) against today's ad-hoc mode on the same files
 * (`portal test --policies policies/pod-security-vap test/fixtures/pss`),
 * each as the real executable in a child process, as CI runs it.
 * Goal: the suite takes at most 1.5x the ad-hoc run.
 *
 * The runs alternate (ad-hoc, suite, ad-hoc, …) so a change in the machine's
 * load hits both; each is measured as CPU time (user + system, from
 * /usr/bin/time, steadier than wall time on a shared machine) and wall time.
 * The medians and their ratios are printed.
 *
 * Run: npm run -s bench -- suites [--rounds 7]
 * Prints one JSON object.
 */
import { spawn } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';

const roundsArg = process.argv.indexOf('--rounds');
const ROUNDS = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 7;
const root = fileURLToPath(new URL('..', import.meta.url));

interface Sample {
  wall: number;
  cpu: number;
}

/** One run of `portal ARGS`, timed by /usr/bin/time; the exit code must be `expect`. */
function timed(args: readonly string[], expect: number): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/time', ['-f', '%e %U %S', process.execPath, `${root}bin/portal.js`, ...args], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => {
      const m = /(\d+\.\d+) (\d+\.\d+) (\d+\.\d+)\s*$/.exec(err);
      if (!m) return reject(new Error(`no timing from /usr/bin/time:\n${err}`));
      // /usr/bin/time exits with the command's code.
      if (code !== expect) return reject(new Error(`portal ${args.join(' ')} exited ${code}, expected ${expect}:\n${err}`));
      resolve({ wall: Number(m[1]), cpu: Number(m[2]) + Number(m[3]) });
    });
  });
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

async function main(): Promise<void> {
  // The ad-hoc run exits 1 (bad fixtures fail); the suite exits 0 (every expectation holds).
  const adhocArgs = ['test', '--policies', 'policies/pod-security-vap', 'test/fixtures/pss'];
  const suiteArgs = ['test', '--strict', 'policies/pod-security-vap/tests/pod-security-vap.portal-test.yaml'];
  const load = [loadavg()[0] ?? NaN];
  // One warm-up each: tsx's compile cache and the page cache, for both.
  await timed(adhocArgs, 1);
  await timed(suiteArgs, 0);
  const adhoc: Sample[] = [];
  const suite: Sample[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    adhoc.push(await timed(adhocArgs, 1));
    suite.push(await timed(suiteArgs, 0));
  }
  load.push(loadavg()[0] ?? NaN);
  const m = (xs: Sample[], k: keyof Sample): number => Number(median(xs.map((x) => x[k])).toFixed(2));
  console.log(
    JSON.stringify(
      {
        benchmark: 'suites',
        machine: { cpus: cpus().length, node: process.version, loadavg1m: load.map((l) => Math.round(l * 100) / 100) },
        rounds: ROUNDS,
        seconds: {
          adhoc: { cpu: m(adhoc, 'cpu'), wall: m(adhoc, 'wall') },
          suite: { cpu: m(suite, 'cpu'), wall: m(suite, 'wall') },
        },
        // Goal: <= 1.5.
        suiteToAdhocCpuRatio: Number((median(suite.map((x) => x.cpu)) / median(adhoc.map((x) => x.cpu))).toFixed(2)),
        suiteToAdhocWallRatio: Number((median(suite.map((x) => x.wall)) / median(adhoc.map((x) => x.wall))).toFixed(2)),
      },
      null,
      2,
    ),
  );
}

await main();
