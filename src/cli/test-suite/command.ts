/**
 * `portal test FILE|DIR...` without --policies: runs test suites
 * (`*.portal-test.yaml`, docs/design.md §9). Bad input anywhere (flags, a suite that
 * does not parse or names what does not exist) is exit 2 with file and line;
 * otherwise exit 1 when an expectation does not hold (or, with --strict, a
 * verdict is not named by any), else 0.
 */
import { writeFile } from 'node:fs/promises';
import { basename, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs, type FlagDef } from '../../config/args.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type CommandIO } from '../command.ts';
import { discoverSuites } from './discover.ts';
import { SUITE_FILE, type SuiteOutcome } from './format.ts';
import { loadSuite } from './load.ts';
import { parseSuite } from './parse.ts';
import { readSuiteFile } from './read-suite-file.ts';
import { formatJson, formatJunit, formatProblems, formatText } from './report.ts';
import { runSuite } from './run.ts';
import { threadMemoryFor } from '../../evaluation/thread-memory.ts';
import { EvaluationThread } from '../offline/evaluation-thread.ts';
import { evaluationMemoryFlag, releaseThreadHeapFlags, replicaMemoryMiB } from '../process-memory.ts';

export const SUITE_HELP = `
       portal test [--output table|json] [--junit FILE] [--strict] FILE|DIR...

Runs test suites: files of apiVersion cli.portal.dev/v1alpha1, kind Test, that name
policies, resources and the verdict expected for each (docs/testing-policies.md;
JSON Schema: schemas/portal-test.schema.json). A FILE is run as a suite whatever its
name; a DIR is searched recursively for *.portal-test.yaml (hidden directories,
node_modules and symbolic links to directories are skipped). Used when --policies
is not given.

Suite flags:
  --output, -o FORMAT     table (default): a PASS/FAIL line per suite, one line per failed
                          expectation (file:line, expected, got, message) and a summary;
                          json: the same information as one JSON object
  --junit FILE            also write JUnit XML to FILE: one testsuite per suite file, one
                          testcase per expectation
  --strict                verdicts that no expectation names fail the run (they are
                          listed either way)
  --evaluation-memory MIB heap of the thread that evaluates, MiB (default: half the memory of
                          the machine or container, 128 to 1024); a rule that exhausts it on a
                          resource gives error there, the suite's other resources still run

Suite exit codes: 0 every expectation holds, 1 one does not (or, with --strict, a verdict
is not named), 2 bad input (flags, files, a suite that does not parse, match the schema,
or names a rule, binding or resource that does not exist; a CEL cost overrun or a missing
param), reported with file and line.
`;

const FLAGS: readonly FlagDef[] = [
  { flag: 'output', type: 'value', short: 'o' },
  { flag: 'junit', type: 'value' },
  { flag: 'strict', type: 'bool' },
  { flag: 'evaluation-memory', type: 'value' },
  { flag: 'help', type: 'bool', short: 'h' },
  // Recognised here only to say that they belong to the other mode.
  { flag: 'pod-security-version', type: 'value' },
];

const OUTPUTS = ['table', 'json'] as const;

/** The suite's name: metadata.name, else the file name without `.portal-test.yaml`. */
function suiteName(file: string, declared: string | undefined): string {
  return declared !== undefined && declared !== '' ? declared : basename(file).replace(SUITE_FILE, '').replace(/\.ya?ml$/, '');
}

/**
 * Parses, loads and runs one suite; never throws for bad input. Evaluates in
 * `thread` (offline/evaluation-thread.ts); without one, in a thread of its
 * own, limited as a replica of this machine's memory would be.
 */
export async function runSuiteFile(file: string, thread?: EvaluationThread): Promise<SuiteOutcome> {
  const started = performance.now();
  const own = thread ?? new EvaluationThread(threadMemoryFor(replicaMemoryMiB(), 1));
  try {
    return await runOne(file, started, own);
  } catch (e) {
    // A defect of ours on a hostile suite still names the suite and ends the run with exit 2, not a stack trace.
    return { file, name: suiteName(file, undefined), problems: [{ file, message: `could not be run: ${e instanceof Error ? e.message : String(e)}` }], expectations: [], unlisted: [], seconds: (performance.now() - started) / 1000 };
  } finally {
    if (thread === undefined) await own.close();
  }
}

async function runOne(file: string, started: number, thread: EvaluationThread): Promise<SuiteOutcome> {
  const done = (o: Omit<SuiteOutcome, 'seconds' | 'file'>): SuiteOutcome => ({ file, ...o, seconds: (performance.now() - started) / 1000 });
  const text = await readSuiteFile(file);
  if (!text.ok) return done({ name: suiteName(file, undefined), problems: [{ file, message: text.message }], expectations: [], unlisted: [] });
  const parsed = await parseSuite(file, text.text);
  if (!parsed.ok) return done({ name: suiteName(file, undefined), problems: parsed.problems, expectations: [], unlisted: [] });
  const name = suiteName(file, parsed.suite.metadata?.name);
  const loaded = await loadSuite(file, parsed.suite, parsed.locate);
  if (!loaded.ok) return done({ name, problems: loaded.problems, expectations: [], unlisted: [] });
  const run = await runSuite(loaded.suite, thread);
  return done({ name, problems: run.problems, expectations: run.expectations, unlisted: run.unlisted });
}

export async function runSuites(argv: string[], io: CommandIO): Promise<number> {
  const args = parseArgs(argv, FLAGS, 'portal test');
  const problems = [...args.problems];
  const output = args.values.get('output')?.at(-1) ?? 'table';
  if (!(OUTPUTS as readonly string[]).includes(output)) {
    problems.push(`--output "${output}" is not supported for suites; use ${OUTPUTS.join(' or ')}${output === 'policyreport' ? ' (policyreport is for --policies DIR FILE...)' : ''}`);
  }
  if (args.values.has('pod-security-version')) {
    problems.push('--pod-security-version is for --policies DIR FILE...; a suite pins the version with its namespaces (label pod-security.kubernetes.io/enforce-version)');
  }
  const memory = evaluationMemoryFlag(args.values.get('evaluation-memory')?.at(-1));
  if ('problem' in memory) problems.push(memory.problem);
  const strictValue = args.values.get('strict')?.at(-1);
  if (strictValue !== undefined && strictValue !== 'true' && strictValue !== 'false') problems.push(`--strict takes no value (got --strict=${strictValue})`);
  const strict = strictValue === 'true';
  const junit = args.values.get('junit')?.at(-1);
  if (args.positionals.length === 0) problems.push('no FILE or DIR given: name suite files (*.portal-test.yaml) or directories holding them, or use --policies DIR FILE... to evaluate manifests');
  if (problems.length > 0 || 'problem' in memory) {
    io.stderr.write(`portal test: ${problems.length} problem${problems.length === 1 ? '' : 's'} with the input:\n${problems.map((p) => `  - ${p}\n`).join('')}Nothing was run ('portal test --help' for usage).\n`);
    return EXIT_USAGE;
  }

  // The thread that evaluates starts now: it loads its modules while this one finds and reads the suites.
  releaseThreadHeapFlags();
  const thread = new EvaluationThread(memory.memory);
  thread.start();
  const paths = args.positionals.map((p) => (p === '' ? p : resolve(io.cwd, p)));
  const outcomes: SuiteOutcome[] = [];
  let discovery: Awaited<ReturnType<typeof discoverSuites>>;
  try {
    discovery = await discoverSuites(paths);
    // One at a time: each suite compiles its own policies; running them side by side would only compete for the one thread.
    for (const file of discovery.files) outcomes.push(await runSuiteFile(file, thread));
  } finally {
    await thread.close();
  }
  // Paths as the user gave them (relative to the working directory) read better in CI logs.
  const shown = outcomes.map((o) => relativeTo(io.cwd, o));
  const found = discovery.problems.map((p) => shorten(io.cwd, p));

  io.stdout.write(output === 'json' ? formatJson(shown, found, strict) : formatText(shown, strict));
  const bad = formatProblems(shown, found);
  if (bad) io.stderr.write(bad);
  if (junit !== undefined) {
    try {
      await writeFile(resolve(io.cwd, junit), formatJunit(shown, strict));
    } catch (e) {
      io.stderr.write(`portal test: --junit ${junit}: cannot write: ${(e as Error).message}\n`);
      return EXIT_USAGE;
    }
  }
  if (bad) return EXIT_USAGE;
  const failed = shown.some((o) => o.expectations.some((e) => !e.ok) || (strict && o.unlisted.length > 0));
  return failed ? EXIT_FAILURE : EXIT_OK;
}

/** Paths under the working directory written relative to it, as the user typed them. */
function shorten(cwd: string, text: string): string {
  return cwd === '/' ? text : text.split(`${cwd}/`).join('');
}

/** The outcome with the paths in it relative to the working directory. */
function relativeTo(cwd: string, o: SuiteOutcome): SuiteOutcome {
  return { ...o, file: shorten(cwd, o.file), problems: o.problems.map((p) => ({ ...p, file: shorten(cwd, p.file), message: shorten(cwd, p.message) })) };
}
