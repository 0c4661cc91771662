/**
 * What `portal test` prints for suites: text (one line per failed
 * expectation, unlisted verdicts, a summary), JSON (the same information),
 * and JUnit XML (one testsuite per suite file, one testcase per
 * expectation). Pure functions of the outcomes.
 */
import type { Verdict } from '../../policy/index.ts';
import { formatProblem, type ExpectationOutcome, type SuiteOutcome, type UnlistedVerdict } from './format.ts';

/** Unlisted verdicts shown per suite in text when they are not failures (--output json lists them all). */
export const UNLISTED_SHOWN = 20;

const SEVERITY: Record<Verdict, number> = { error: 4, fail: 3, warn: 2, pass: 1, skip: 0 };

export interface Totals {
  suites: number;
  /** Suites that could not be run (bad input). */
  invalid: number;
  expectations: number;
  held: number;
  failed: number;
  unlisted: number;
}

export function totals(outcomes: readonly SuiteOutcome[]): Totals {
  const t: Totals = { suites: outcomes.length, invalid: 0, expectations: 0, held: 0, failed: 0, unlisted: 0 };
  for (const o of outcomes) {
    if (o.problems.length > 0) t.invalid++;
    t.expectations += o.expectations.length;
    t.held += o.expectations.filter((e) => e.ok).length;
    t.failed += o.expectations.filter((e) => !e.ok).length;
    t.unlisted += o.unlisted.length;
  }
  return t;
}

const oneLine = (s: string): string => s.replace(/\s*\n\s*/g, ' ');
const plural = (n: number, word: string, many = `${word}s`): string => `${n.toLocaleString('en-US')} ${n === 1 ? word : many}`;

function subject(x: { rule: string; binding?: string; kind: string; namespace: string; name: string }): string {
  return `${x.rule}${x.binding !== undefined ? ` (binding ${x.binding})` : ''} on ${x.kind} ${x.namespace ? `${x.namespace}/` : ''}${x.name}`;
}

/** `expected fail, got pass: MESSAGE` (or the message check that failed). */
export function failureText(e: ExpectationOutcome): string {
  const wanted = e.messageContains !== undefined && e.got === e.expected ? `${e.expected} with a message containing ${JSON.stringify(e.messageContains)}` : e.expected;
  return `expected ${wanted}, got ${e.got}: ${oneLine(e.message)}`;
}

export function unlistedText(u: UnlistedVerdict): string {
  return `${subject(u)}: ${u.result}: ${oneLine(u.message)}`;
}

/**
 * Per suite: a PASS/FAIL line, a `file:line:` line per failed expectation,
 * the unlisted verdicts; then the summary. Bad input goes to stderr (see
 * formatProblems), so this is the whole of stdout.
 */
export function formatText(outcomes: readonly SuiteOutcome[], strict: boolean): string {
  const out: string[] = [];
  for (const o of outcomes) {
    if (o.problems.length > 0) {
      out.push(`ERROR ${o.file}: not run, ${plural(o.problems.length, 'problem')} with the suite (see stderr)`);
      continue;
    }
    const failed = o.expectations.filter((e) => !e.ok);
    const strictFail = strict && o.unlisted.length > 0;
    const counts = `${plural(o.expectations.length, 'expectation')}${failed.length ? `, ${failed.length} failed` : ''}${o.unlisted.length ? `, ${plural(o.unlisted.length, 'verdict')} not named` : ''}`;
    out.push(`${failed.length > 0 || strictFail ? 'FAIL' : 'PASS'} ${o.file} (${counts})`);
    for (const e of failed) out.push(`  ${o.file}:${e.line}: ${subject(e)}: ${failureText(e)}`);
    if (o.unlisted.length > 0) {
      // The verdicts most likely to matter first: an unexpected failure reads before a hundred passes.
      const ordered = o.unlisted.map((u, i) => ({ u, i })).sort((a, b) => SEVERITY[b.u.result] - SEVERITY[a.u.result] || a.i - b.i).map((x) => x.u);
      const shown = strict ? ordered : ordered.slice(0, UNLISTED_SHOWN);
      const counts = (['error', 'fail', 'warn', 'pass', 'skip'] as const).flatMap((r) => {
        const n = o.unlisted.filter((u) => u.result === r).length;
        return n > 0 ? [`${n} ${r}`] : [];
      });
      out.push(`  not named by any expectation (${counts.join(', ')})${strict ? ', failures with --strict' : ''}:`);
      for (const u of shown) out.push(`    ${unlistedText(u)}`);
      if (shown.length < o.unlisted.length) out.push(`    … and ${o.unlisted.length - shown.length} more (--output json lists them all)`);
    }
  }
  const t = totals(outcomes);
  const parts = [
    `${plural(t.suites, 'suite')}${t.invalid ? ` (${t.invalid} not run: bad input)` : ''}`,
    `${plural(t.expectations, 'expectation')}: ${t.held.toLocaleString('en-US')} held, ${t.failed.toLocaleString('en-US')} failed`,
    `${plural(t.unlisted, 'verdict')} not named by any expectation${t.unlisted > 0 ? (strict ? ' (failures with --strict)' : ' (not failures without --strict)') : ''}`,
  ];
  out.push('', parts.join('; '));
  return `${out.join('\n')}\n`;
}

/** Bad input, for stderr: one `file:line:column: message` per problem. */
export function formatProblems(outcomes: readonly SuiteOutcome[], discovery: readonly string[]): string {
  const lines = [...discovery, ...outcomes.flatMap((o) => o.problems.map(formatProblem))];
  if (lines.length === 0) return '';
  return (
    `portal test: ${plural(lines.length, 'problem')} with the input:\n` +
    lines.map((l) => `  - ${l.replace(/\n/g, '\n    ')}\n`).join('') +
    "Suites with problems were not run. Fix the problems above and run again ('portal test --help' for usage).\n"
  );
}

export function formatJson(outcomes: readonly SuiteOutcome[], discovery: readonly string[], strict: boolean): string {
  const t = totals(outcomes);
  return `${JSON.stringify(
    {
      suites: outcomes.map((o) => ({
        file: o.file,
        name: o.name,
        problems: o.problems.map((p) => ({ line: p.position?.line ?? null, column: p.position?.column ?? null, message: p.message })),
        expectations: o.expectations,
        unlisted: o.unlisted,
        seconds: o.seconds,
      })),
      problems: discovery,
      summary: { ...t, strict },
    },
    null,
    2,
  )}\n`;
}

/**
 * Text as XML 1.0 character data or attribute value: the five special
 * characters escaped, and the characters XML 1.0 cannot carry at all (C0
 * controls but tab, CR and LF; lone surrogates; U+FFFE/U+FFFF) written as
 * `\uXXXX` so a hostile message cannot make the report unparsable.
 */
export function xmlEscape(s: string): string {
  // eslint-disable-next-line no-control-regex -- matching the control characters XML cannot carry is the point
  return s.replace(/[&<>"']|[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, (c) => {
    switch (c) {
      case '&':
        return '&amp;';
      case '<':
        return '&lt;';
      case '>':
        return '&gt;';
      case '"':
        return '&quot;';
      case "'":
        return '&apos;';
      default:
        return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
    }
  });
}

/**
 * JUnit XML as CI systems read it (Jenkins, GitLab, GitHub reporters): one
 * `<testsuite>` per suite file, one `<testcase>` per expectation, a
 * `<failure>` for one that does not hold; a suite with bad input is one
 * `<error>` testcase; unlisted verdicts are testcases that fail with
 * `--strict`, otherwise `<system-out>` lines.
 */
export function formatJunit(outcomes: readonly SuiteOutcome[], strict: boolean): string {
  const a = (v: string | number): string => `"${xmlEscape(String(v))}"`;
  const out: string[] = ['<?xml version="1.0" encoding="UTF-8"?>'];
  const t = totals(outcomes);
  const strictCases = strict ? t.unlisted : 0;
  const strictFailures = strict ? t.unlisted : 0;
  const seconds = outcomes.reduce((s, o) => s + o.seconds, 0);
  out.push(`<testsuites name="portal test" tests=${a(t.expectations + t.invalid + strictCases)} failures=${a(t.failed + strictFailures)} errors=${a(t.invalid)} time=${a(seconds.toFixed(3))}>`);
  for (const o of outcomes) {
    const failures = o.expectations.filter((e) => !e.ok).length + (strict ? o.unlisted.length : 0);
    const errors = o.problems.length > 0 ? 1 : 0;
    const tests = o.expectations.length + errors + (strict ? o.unlisted.length : 0);
    out.push(`  <testsuite name=${a(o.name)} file=${a(o.file)} tests=${a(tests)} failures=${a(failures)} errors=${a(errors)} skipped="0" time=${a(o.seconds.toFixed(3))}>`);
    if (errors) {
      const text = o.problems.map(formatProblem).join('\n');
      out.push(`    <testcase classname=${a(o.name)} name="load suite" file=${a(o.file)}>`);
      out.push(`      <error message=${a(`${o.problems.length} problem(s) with the suite`)} type="bad input">${xmlEscape(text)}</error>`);
      out.push('    </testcase>');
    }
    for (const e of o.expectations) {
      const open = `    <testcase classname=${a(o.name)} name=${a(`${subject(e)} is ${e.expected}`)} file=${a(o.file)} line=${a(e.line)}`;
      if (e.ok) out.push(`${open}/>`);
      else {
        out.push(`${open}>`);
        out.push(`      <failure message=${a(`expected ${e.expected}, got ${e.got}`)} type="expectation">${xmlEscape(`${o.file}:${e.line}: ${subject(e)}: ${failureText(e)}`)}</failure>`);
        out.push('    </testcase>');
      }
    }
    if (strict) {
      for (const u of o.unlisted) {
        out.push(`    <testcase classname=${a(o.name)} name=${a(`${subject(u)} is not named by any expectation`)} file=${a(o.file)}>`);
        out.push(`      <failure message=${a(`unlisted ${u.result} verdict (--strict)`)} type="unlisted">${xmlEscape(unlistedText(u))}</failure>`);
        out.push('    </testcase>');
      }
    } else if (o.unlisted.length > 0) {
      out.push(`    <system-out>${xmlEscape(['Verdicts not named by any expectation:', ...o.unlisted.map(unlistedText)].join('\n'))}</system-out>`);
    }
    out.push('  </testsuite>');
  }
  out.push('</testsuites>');
  return `${out.join('\n')}\n`;
}
