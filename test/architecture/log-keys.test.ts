/**
 * One log key set (issue 21 item 4): every field a log call in src/ or
 * packages/devcluster/src writes is named by `LogKey`, so dashboards and
 * queries do not drift from the code, and an error goes under
 * `[LogKey.error]` as the error object itself (pino's err serializer then
 * gives type, message and stack), never as its `.message` or a description,
 * and always through `toError()` (observability/errors.ts), since a thrown
 * value need not be an Error and pino would log a string or object as is.
 *
 * A source scan: every `.trace|debug|info|warn|error|fatal|child({…})` and
 * `log[level]({…})` call's object literal, including the object literals
 * spread into it.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DIRS = ['src', 'packages/devcluster/src'];

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** Index just past the bracket closing the one at `open` (skips strings, template literals and comments). */
function closing(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'" || c === '"' || c === '`') {
      for (i++; i < text.length && text[i] !== c; i++) if (text[i] === '\\') i++;
    } else if (c === '/' && text[i + 1] === '/') {
      i = text.indexOf('\n', i);
    } else if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c) && --depth === 0) return i + 1;
  }
  throw new Error(`unbalanced bracket at ${open}`);
}

/** The top-level entries of the object literal `{…}` (without its braces). */
function entries(literal: string): string[] {
  const body = literal.slice(1, -1);
  const out: string[] = [];
  let start = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if ('([{\'"`'.includes(c)) i = ('\'"`'.includes(c) ? skipString(body, i) : closing(body, i)) - 1;
    else if (c === ',') {
      out.push(body.slice(start, i));
      start = i + 1;
    }
  }
  out.push(body.slice(start));
  return out.map((e) => e.trim()).filter((e) => e !== '');
}

function skipString(text: string, at: number): number {
  const q = text[at]!;
  let i = at + 1;
  for (; i < text.length && text[i] !== q; i++) if (text[i] === '\\') i++;
  return i + 1;
}

/** The object literals inside a spread expression (`...(c ? { … } : {})`). */
function literalsIn(expr: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < expr.length; i++) {
    if (expr[i] === '{') {
      const end = closing(expr, i);
      out.push(expr.slice(i, end));
      i = end - 1;
    }
  }
  return out;
}

/** Problems in one log call's fields object, as `what` lines. */
function check(literal: string): string[] {
  const bad: string[] = [];
  for (const entry of entries(literal)) {
    if (entry.startsWith('...')) {
      for (const inner of literalsIn(entry.slice(3))) bad.push(...check(inner));
      continue;
    }
    const key = /^\[LogKey\.(\w+)\]\s*:\s*([\s\S]*)$/.exec(entry);
    if (!key) {
      bad.push(`key not from LogKey: ${entry.split(/\s*:/)[0]}`);
      continue;
    }
    const value = key[2]!;
    if (key[1] !== 'error') continue;
    if (/\.message\b|describeApiError\(|String\(|errorMessage\(/.test(value)) bad.push(`[LogKey.error] given a description, not the error object: ${value}`);
    else if (!/^toError\(/.test(value)) bad.push(`[LogKey.error] not wrapped in toError() (a throwable need not be an Error): ${value}`);
  }
  return bad;
}

const CALL = /(?:\.(?:trace|debug|info|warn|error|fatal|child)|\blog\w*\[[^\]\n]+\])\(\s*(?=\{)/g;

function scan(): { found: number; bad: string[] } {
  let found = 0;
  const bad: string[] = [];
  for (const dir of DIRS) {
    for (const file of files(join(ROOT, dir))) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(CALL)) {
        // Skip examples in comments (`logger.child({ component: … })` in a doc comment).
        const lineStart = text.lastIndexOf('\n', m.index) + 1;
        if (/^\s*(\*|\/\/)/.test(text.slice(lineStart, m.index))) continue;
        const open = m.index + m[0].length;
        const literal = text.slice(open, closing(text, open));
        found++;
        const line = text.slice(0, m.index).split('\n').length;
        for (const what of check(literal)) bad.push(`${relative(ROOT, file)}:${line}: ${what}`);
      }
    }
  }
  return { found, bad };
}

test('every log field key comes from LogKey, and errors are logged as error objects', () => {
  const { found, bad } = scan();
  assert.ok(found > 50, `the scan finds the log calls (found ${found})`);
  assert.deepEqual(bad, []);
});

test('the scan catches ad-hoc keys, shorthand keys and error messages', () => {
  assert.deepEqual(check('{ [LogKey.error]: toError(err), [LogKey.name]: x }'), []);
  assert.deepEqual(check('{ ...(id ? { [LogKey.uid]: id } : {}) }'), []);
  assert.equal(check('{ err }').length, 1);
  assert.equal(check('{ epoch: term.epochString }').length, 1);
  assert.equal(check("{ 'reason': r }").length, 1);
  assert.equal(check('{ ...(id ? { uid: id } : {}) }').length, 1);
  assert.equal(check('{ [LogKey.error]: (err as Error).message }').length, 1);
  assert.equal(check('{ [LogKey.error]: describeApiError(err) }').length, 1);
  assert.equal(check('{ [LogKey.error]: err }').length, 1);
});
