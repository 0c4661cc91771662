/**
 * Where a JSON document stops being JSON, for a message that names the line
 * and column (manifests.ts): the position JSON.parse's message carries is
 * V8's wording, so it is found here instead, only after a failure.
 */

/**
 * Offset of the first JSON syntax error (Node 20's JSON.parse messages carry
 * no position): a minimal recursive-descent scan, run only after a failure.
 */
function jsonErrorOffset(text: string): number {
  let i = 0;
  const ws = (): void => {
    while (i < text.length && ' \t\n\r'.includes(text[i] as string)) i++;
  };
  const fail = (): never => {
    throw i;
  };
  const literal = (word: string): void => {
    if (text.startsWith(word, i)) i += word.length;
    else fail();
  };
  const string = (): void => {
    i++;
    while (i < text.length && text[i] !== '"') {
      if (text.charCodeAt(i) < 0x20) fail();
      i += text[i] === '\\' ? 2 : 1;
    }
    if (i >= text.length) fail();
    i++;
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      ws();
      if (text[i] === '}') return void i++;
      for (;;) {
        ws();
        if (text[i] !== '"') fail();
        string();
        ws();
        if (text[i] !== ':') fail();
        i++;
        value();
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === '}') return void i++;
        else fail();
      }
    }
    if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') return void i++;
      for (;;) {
        value();
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === ']') return void i++;
        else fail();
      }
    }
    if (c === '"') return string();
    if (c === 't') return literal('true');
    if (c === 'f') return literal('false');
    if (c === 'n') return literal('null');
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) fail();
    i += (m as RegExpExecArray)[0].length;
  };
  try {
    value();
    ws();
    return i < text.length ? i : -1;
  } catch (offset) {
    // Only numbers are thrown above; anything else (a stack overflow) has no position.
    return typeof offset === 'number' ? offset : -1;
  }
}

/** `invalid JSON at line L, column C: what` for the error JSON.parse threw on `text`. */
export function jsonSyntaxError(text: string, e: unknown): string {
  const offset = jsonErrorOffset(text);
  const what = (e instanceof Error ? e.message : String(e)).split(',')[0] ?? 'syntax error';
  if (offset < 0) return `invalid JSON: ${what}`;
  const before = text.slice(0, offset).split('\n');
  const line = before.length;
  const col = (before[before.length - 1] ?? '').length + 1;
  return `invalid JSON at line ${line}, column ${col}: ${offset >= text.length ? 'unexpected end of input' : what}`;
}
