/**
 * Where a JSON document stops being JSON, for a message that names the line
 * and column (manifests.ts). JSON.parse says what is wrong, but for the most
 * common mistakes (a stray `}` or `]`, a trailing comma: "Unexpected token")
 * V8 gives no position on Node 20 or 24, only a snippet of the text; so the
 * position comes from jsonc-parser's scanner in strict mode (no comments, no
 * trailing commas), run only after JSON.parse failed.
 */
import { visit } from 'jsonc-parser';

interface Place {
  offset: number;
  /** 1-based, as an editor shows them. */
  line: number;
  column: number;
}

const STRICT = { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false } as const;

/** The first syntax error of `text`, or undefined when the scanner finds none. */
function firstError(text: string): Place | undefined {
  let first: Place | undefined;
  visit(
    text,
    {
      onError: (_code, offset, _length, startLine, startCharacter) => {
        first ??= { offset, line: startLine + 1, column: startCharacter + 1 };
      },
    },
    STRICT,
  );
  return first;
}

/**
 * What V8 says is wrong, without its position or its snippet of the text:
 * `Unexpected token '}', "…" is not valid JSON` → `Unexpected token '}'`;
 * `Unterminated string in JSON at position 4 (line 1 column 5)` → `Unterminated string`.
 */
function what(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const cut = /,\s*(?:\.\.\.)?"|\s+(?:in JSON\s+)?at position \d/s.exec(message);
  return (cut ? message.slice(0, cut.index) : message) || 'syntax error';
}

/** `invalid JSON at line L, column C: what` for the error JSON.parse threw on `text`. */
export function jsonSyntaxError(text: string, e: unknown): string {
  const at = firstError(text);
  if (at === undefined) return `invalid JSON: ${what(e)}`;
  return `invalid JSON at line ${at.line}, column ${at.column}: ${at.offset >= text.length ? 'unexpected end of input' : what(e)}`;
}
