/**
 * The position a JSON syntax error is reported at (src/config/json-error.ts)
 * against V8's own verdict: for every text JSON.parse rejects, the message
 * names a line and column, and where V8 gives a position itself, ours is on
 * the same line and not after it (the start of the token V8 stopped in).
 * The texts are a valid manifest with one to three random edits (fixed seed).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonSyntaxError } from '../../src/config/json-error.ts';

const BASE = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [{ a: [1, -2.5e3, true, false, null, 'x\\"y\u00e9\n'], b: { c: {}, d: [] } }] }, null, 2);
const ALPHABET = ['{', '}', '[', ']', ',', ':', '"', '\\', '-', '+', '.', 'e', '0', '1', ' ', '\n', '\t', '\r', 'n', 't', 'f', '\u0001', '/', '*', "'", 'u', 'x'];

function mutants(count: number): string[] {
  let seed = 42;
  const rnd = (n: number): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    let t = BASE;
    for (let k = 0, n = 1 + rnd(3); k < n; k++) {
      const at = rnd(t.length + 1);
      const op = rnd(3);
      const ch = ALPHABET[rnd(ALPHABET.length)]!;
      t = op === 0 ? t.slice(0, at) + t.slice(at + 1) : op === 1 ? t.slice(0, at) + ch + t.slice(at) : t.slice(0, at) + ch + t.slice(at + 1);
    }
    out.push(t);
  }
  return out;
}

/** 1-based line and column of `offset`, lines broken as an editor breaks them. */
function place(text: string, offset: number): { line: number; column: number } {
  const lines = text.slice(0, offset).split(/\r\n|\r|\n/);
  return { line: lines.length, column: lines.at(-1)!.length + 1 };
}

test('every text JSON.parse rejects gets a line and column, never past where V8 stopped', () => {
  let rejected = 0;
  let positioned = 0;
  for (const text of mutants(10_000)) {
    let error: unknown;
    try {
      JSON.parse(text);
      continue;
    } catch (e) {
      error = e;
    }
    rejected++;
    const message = jsonSyntaxError(text, error);
    const ours = /^invalid JSON at line (\d+), column (\d+): \S/.exec(message);
    assert.ok(ours, `${JSON.stringify(text)}: ${message}`);
    const v8 = /at position (\d+)/.exec((error as Error).message);
    if (!v8) continue;
    positioned++;
    const theirs = place(text, Number(v8[1]));
    assert.equal(Number(ours[1]), theirs.line, `${JSON.stringify(text)}: ${message} (V8: ${(error as Error).message})`);
    assert.ok(Number(ours[2]) <= theirs.column, `${JSON.stringify(text)}: ${message} (V8: ${(error as Error).message})`);
  }
  // The corpus exercises both kinds of V8 message: with a position and without one ("Unexpected token").
  assert.ok(rejected > 5_000 && positioned > 2_500 && rejected - positioned > 1_000, `${rejected} rejected, ${positioned} with V8's position`);
});

test('the message says what is wrong in V8 words, without its position or snippet', () => {
  const message = (text: string): string => {
    try {
      JSON.parse(text);
    } catch (e) {
      return jsonSyntaxError(text, e);
    }
    throw new Error(`${text} is valid JSON`);
  };
  assert.equal(message('[1,2,]'), "invalid JSON at line 1, column 6: Unexpected token ']'");
  assert.equal(message('[1,\n,2]'), "invalid JSON at line 2, column 1: Unexpected token ','");
  assert.equal(message('{"a" 1}'), "invalid JSON at line 1, column 6: Expected ':' after property name");
  assert.equal(message('{"a": 1 // why\n}'), "invalid JSON at line 1, column 9: Expected ',' or '}' after property value");
  assert.equal(message('{"a":1}\r\n}'), 'invalid JSON at line 2, column 1: Unexpected non-whitespace character after JSON');
  assert.equal(message('  '), 'invalid JSON at line 1, column 3: unexpected end of input');
});
