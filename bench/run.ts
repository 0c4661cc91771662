/**
 * `npm run bench [-- NAME... [--flag value...]]`: runs the named benchmarks
 * (all that exist when none is named), one child process each so that they
 * cannot disturb each other's JIT state or heap, one after the other so they
 * do not compete for the CPU. Each prints one JSON object; this prints them
 * as a JSON array on stdout. Flags after the names go to every benchmark.
 *
 *   npm run bench                     all benchmarks
 *   npm run bench -- admission        one
 *   npm run bench -- engine --seconds 1
 *   npm run bench -- --help           this text
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));

/** Known benchmarks, in the order `npm run bench` runs them, with the Node flags each needs. */
const BENCHES: Record<string, { file: string; nodeFlags: string[]; about: string }> = {
  engine: { file: 'engine.ts', nodeFlags: [], about: 'PSS library evaluations/s and compile cost vs JSON.parse' },
  vap: { file: 'vap.ts', nodeFlags: [], about: 'PSS as ValidatingAdmissionPolicies (CEL) vs the JSON Schema PSS library, time per evaluation' },
  admission: { file: 'admission.ts', nodeFlags: [], about: 'portal serve vs a bare HTTPS ceiling: req/s ratio, p99 at 1,000 req/s' },
  exceptions: { file: 'exceptions.ts', nodeFlags: [], about: 'admission decision CPU with 1,000 PortalExceptions loaded vs none' },
  accept: { file: 'accept.ts', nodeFlags: [], about: 'a new connection behind a full accept queue on a loaded event loop: 1 listening socket vs 8 (SO_REUSEPORT)' },
  'fair-queue': { file: 'fair-queue.ts', nodeFlags: [], about: 'fair queuing (flows, deficit round robin) per review on the main thread vs the FIFO it replaced' },
  'rule-results': { file: 'rule-results.ts', nodeFlags: [], about: 'admission decision CPU in a worker with the per-rule counts and times recorded vs without; scrape cost' },
  'denial-events': { file: 'denial-events.ts', nodeFlags: ['--expose-gc'], about: 'main-thread CPU per denied request with --denial-events (aggregated in memory) vs the log line alone; memory held after a flood' },
  apiserver: { file: 'apiserver.ts', nodeFlags: [], about: 'the embedded API server under writes and watches' },
  protobuf: { file: 'protobuf.ts', nodeFlags: [], about: 'protobuf encode/decode per object vs JSON (embedded API server codec)' },
  apply: { file: 'apply.ts', nodeFlags: [], about: 'server-side apply vs merge patch per object (embedded API server)' },
  controllers: { file: 'controllers.ts', nodeFlags: [], about: 'workload controllers + simulated node at 1,000 Pods vs client Pod creates' },
  audit: { file: 'audit.ts', nodeFlags: ['--expose-gc'], about: 'audit passes over many Pods' },
  reports: { file: 'reports.ts', nodeFlags: ['--expose-gc'], about: 'report objects, bytes, first-pass writes and time, one-change writes, RSS (namespace vs resource)' },
  incremental: { file: 'incremental.ts', nodeFlags: [], about: 'Pods created at a steady rate while replicas run: report settle time, leader vs follower CPU per object, report writes vs budget' },
  failover: { file: 'failover.ts', nodeFlags: [], about: 'leader failover time' },
  cel: { file: 'cel.ts', nodeFlags: [], about: 'CEL rules vs the JSON Schema PSS library on the same Pod; cel-js vs @bufbuild/cel' },
  suites: { file: 'suites.ts', nodeFlags: [], about: 'portal test: the VAP library suite vs the ad-hoc run on the same files (child processes)' },
  'type-check': { file: 'type-check.ts', nodeFlags: [], about: 'a rule at apply: validateRule with the type check vs without (the shipped library, the largest rule)' },
  'rule-churn': { file: 'rule-churn.ts', nodeFlags: ['--expose-gc'], about: 'compile+release of a 62 KB rule schema (shared ajv + removeSchema vs an instance per schema; codegen optimisation on vs off); YAML duplicate-key check at 20k/40k/1.4M keys; 100 such rules on portal dev beside a 10/s victim' },
  'rule-check': { file: 'rule-check.ts', nodeFlags: [], about: 'main-thread event-loop delay while /validate-portal-kinds checks 62 KB rules: the check on the main thread vs on the rule-check thread' },
  'cel-conformance': { file: 'cel-conformance.ts', nodeFlags: [], about: 'cel-spec conformance of @bufbuild/cel, cel-js and Portal\'s CEL environment' },
};

function usage(): string {
  const lines = Object.entries(BENCHES).map(
    ([name, b]) => `  ${name.padEnd(10)} ${b.about}${existsSync(`${here}${b.file}`) ? '' : ' (not written yet)'}`,
  );
  return `usage: npm run bench [-- NAME... [--flag value...]]\n\nbenchmarks:\n${lines.join('\n')}\n`;
}

function runOne(name: string, args: string[]): Promise<unknown> {
  const b = BENCHES[name]!;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...b.nodeFlags, '--import', 'tsx', `${here}${b.file}`, ...args], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const out: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      const text = Buffer.concat(out).toString().trim();
      if (code !== 0) return reject(new Error(`bench ${name} failed (${signal ?? `exit ${code}`})`));
      try {
        resolve(JSON.parse(text));
      } catch {
        resolve({ benchmark: name, output: text });
      }
    });
  });
}

const argv = process.argv.slice(2);
if (argv.includes('--help') || argv.includes('-h') || argv[0] === 'help') {
  process.stdout.write(usage());
} else {
  const firstFlag = argv.findIndex((a) => a.startsWith('-'));
  const names = firstFlag < 0 ? argv : argv.slice(0, firstFlag);
  const flags = firstFlag < 0 ? [] : argv.slice(firstFlag);
  const unknown = names.filter((n) => !(n in BENCHES));
  if (unknown.length > 0) {
    process.stderr.write(`unknown benchmark: ${unknown.join(', ')}\n\n${usage()}`);
    process.exitCode = 2;
  } else {
    const selected = (names.length > 0 ? names : Object.keys(BENCHES)).filter((n) => {
      const present = existsSync(`${here}${BENCHES[n]!.file}`);
      if (!present) process.stderr.write(`skipping ${n}: bench/${BENCHES[n]!.file} does not exist yet\n`);
      return present;
    });
    const results: unknown[] = [];
    for (const name of selected) {
      process.stderr.write(`running ${name}…\n`);
      try {
        results.push(await runOne(name, flags));
      } catch (err) {
        process.stderr.write(`${(err as Error).message}\n`);
        results.push({ benchmark: name, error: (err as Error).message });
        process.exitCode = 1;
      }
    }
    process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  }
}
