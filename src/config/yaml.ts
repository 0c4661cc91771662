/**
 * YAML text to plain values, for every YAML file Portal reads (manifests,
 * rule files, `--config`, the chart's values), bounded against hostile
 * input:
 *
 * - Aliases: a "billion laughs" file expands nine aliases nine levels deep
 *   into 9^9 strings. The `yaml` package counts alias expansions
 *   (`maxAliasCount`) and throws a ReferenceError past the count; that throw
 *   becomes a problem naming the document, never a crash (it used to end
 *   `portal test` with exit 1 and a stack trace).
 * - Nesting: `yaml` composes nodes recursively. Measured with yaml 2.9 on
 *   Node 24: 800 nested flow sequences (`[[[…]]]`, 1.6 KB) overflow the
 *   stack, and 5,000 (10 KB) abort the process outright (V8's regexp compiler
 *   fails as "out of memory" near the stack limit, which no catch can stop).
 *   Its CST parser is iterative but quadratic on deep flow nesting (400,000
 *   levels: 7.6 s). So the depth is checked twice before any node is
 *   composed: on the lexer's tokens (linear, stops at the first level past
 *   the bound; flow collections and compact `- - -` sequences, the forms that
 *   nest one level per two bytes), then exactly on the CST (block nesting by
 *   indentation costs a line per level, so a file within its size bound
 *   parses in time linear in its size).
 */
import { Composer, CST, isMap, isScalar, isSeq, Lexer, LineCounter, Parser, type Document, type Node } from 'yaml';

/**
 * Deepest nesting of collections accepted, in a document and in a JSON
 * value. The deepest object in this repository is 18 levels (a CRD's
 * schema); large third-party CRDs reach about 35. 200 leaves room for any
 * real manifest and stays a quarter of the depth at which `yaml` overflows
 * the stack (800, above).
 */
export const MAX_NESTING_DEPTH = 200;
/** Alias expansions per document (the `yaml` package's own default). */
export const MAX_YAML_ALIASES = 100;

export type YamlDocument = { ok: true; value: unknown } | { ok: false; message: string };

const tooDeep = (where: string): string =>
  `nested deeper than ${MAX_NESTING_DEPTH} levels ${where}; no Kubernetes object is that deep (a hostile or generated file?)`;

/** Lexer control tokens (document start, scalar marker, flow end): not part of the source text. */
const CONTROL = new Set([CST.DOCUMENT, CST.FLOW_END, CST.SCALAR]);

/** What the lexer saw of a YAML text: how many keys and documents it holds, and whether it nests too deep. */
export interface YamlCounts {
  /** Map keys (`:` and `?` indicators: an explicit `? key : value` counts twice). */
  keys: number;
  documents: number;
}

/**
 * One pass over the lexer's tokens: the keys and documents of the text
 * (counted before anything is composed, so that a budget can refuse a file
 * without paying for its nodes), or the line at which flow nesting or one
 * line's compact block sequences pass MAX_NESTING_DEPTH; with an
 * allowance, the refusal of the first key or document over it. Both depths are
 * lower bounds of the real depth, so a file within the bound is never
 * refused here.
 */
function lexicalScan(text: string, allowance?: YamlAllowance): YamlCounts & { problem?: string } {
  let flow = 0;
  let compact = 0;
  let line = 1;
  let keys = 0;
  let documents = 0;
  // A document starts at the lexer's document token (at the start, after `...`) or at a `---` that does not follow one.
  let fresh = false;
  for (const token of new Lexer().lex(text)) {
    if (token === CST.DOCUMENT) {
      documents++;
      fresh = true;
    } else if (token === '---') {
      if (!fresh) documents++;
      fresh = false;
    } else if (fresh && token !== '\n' && token.trim() !== '' && token[0] !== '#') fresh = false;
    if (CONTROL.has(token)) continue;
    if (token === ':' || token === '?') keys++;
    if (allowance && (keys > allowance.keys || documents > allowance.documents)) return { keys, documents, problem: allowance.refuse({ keys, documents }) };
    if (token === '[' || token === '{') flow++;
    else if (token === ']' || token === '}') flow = Math.max(0, flow - 1);
    else if ((token === '-' || token === '?') && flow === 0) compact++;
    if (flow > MAX_NESTING_DEPTH || compact > MAX_NESTING_DEPTH) return { keys, documents, problem: tooDeep(`at line ${line}`) };
    for (let i = token.indexOf('\n'); i !== -1; i = token.indexOf('\n', i + 1)) {
      line++;
      compact = 0;
    }
  }
  return { keys, documents };
}

/** A line that holds one key for sure: a plain key (after `- ` items), then nothing or a plain value that opens nothing. */
const KEY_LINE = /[ ]*(?:-[ ]+)*[A-Za-z0-9_][A-Za-z0-9_./-]*:(?:[ ]+(?:(?:[A-Za-z0-9_./=+]|-(?! ))[A-Za-z0-9_./:=+@, -]*)?)?(?:\n|$)/y;
/** A line that holds no key and opens nothing: blank, a comment, or a document start. */
const QUIET_LINE = /(?:[ ]*(?:#[^\n]*)?|---[ ]*)(?:\n|$)/y;

/**
 * A lower bound of the keys and documents lexicalScan counts, from one
 * regular expression per line: ~10x faster than the yaml package's lexer
 * (measured: 1.4M `key: value` lines, issue 31), so a file far over the
 * budget is refused before the lexer runs (it took 4-5 s of a 5.5 s run on
 * such a file at load 2, 41 s at load 23). It reads the lines that hold
 * `key: plain value`, blanks, comments and `---` from the start, and stops
 * at the first other line: while every line before is one of these, no
 * quoted, block or flow scalar is open, so each such line is a key the lexer
 * counts too (a `---` is a document it counts, and a first document before
 * it). A file that starts otherwise is counted by the lexer alone.
 */
function plainPrefixCounts(text: string, allowance: YamlAllowance): YamlCounts & { problem?: string } {
  let keys = 0;
  let documents = 0;
  let content = false;
  for (let at = 0; at < text.length; ) {
    KEY_LINE.lastIndex = at;
    if (KEY_LINE.test(text)) {
      keys++;
      if (!content) {
        content = true;
        documents++;
      }
      at = KEY_LINE.lastIndex;
    } else {
      QUIET_LINE.lastIndex = at;
      if (!QUIET_LINE.test(text) || QUIET_LINE.lastIndex === at) break;
      // A `---` after content starts a new document; one before any content, the first.
      if (text.startsWith('---', at)) {
        documents++;
        content = true;
      }
      at = QUIET_LINE.lastIndex;
    }
    if (keys > allowance.keys || documents > allowance.documents) return { keys, documents, problem: allowance.refuse({ keys, documents }) };
  }
  return { keys, documents };
}

/**
 * The first key (in text order) that repeats one of its map, or undefined.
 * Linear: yaml's own check (`uniqueKeys`) compares each key with every
 * earlier key of its map, 7.9 s at 20,000 keys and 33 s at 40,000 (issue 31),
 * so the composer runs with it off and this walk, a Set per map, replaces
 * it. Keys compare as yaml compares them: scalars by value (`1` and `"1"`
 * differ), collections by identity.
 */
export function firstDuplicateKey(contents: unknown): Node | undefined {
  let first: Node | undefined;
  const stack: unknown[] = [contents];
  for (let node = stack.pop(); stack.length > 0 || node !== undefined; node = stack.pop()) {
    if (isMap(node)) {
      const seen = new Set<unknown>();
      for (const { key, value } of node.items) {
        if (isScalar(key)) {
          if (seen.has(key.value) && (first === undefined || (key.range?.[0] ?? 0) < (first.range?.[0] ?? 0))) first = key;
          seen.add(key.value);
        } else stack.push(key);
        stack.push(value);
      }
    } else if (isSeq(node)) stack.push(...node.items);
  }
  return first;
}

/** Depth of a CST document, walked with an explicit stack (the walk must not recurse either). */
function cstDepth(document: CST.Document): number {
  let max = 0;
  const stack: [CST.Token | null | undefined, number][] = [[document.value, 1]];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [token, depth] = next;
    if (!token) continue;
    if (token.type !== 'block-map' && token.type !== 'block-seq' && token.type !== 'flow-collection') continue;
    max = Math.max(max, depth);
    if (max > MAX_NESTING_DEPTH) return max;
    for (const item of token.items as CST.CollectionItem[]) {
      stack.push([item.key, depth + 1]);
      stack.push([item.value, depth + 1]);
    }
  }
  return max;
}

/**
 * Why a YAML text nests past MAX_NESTING_DEPTH, or undefined: for a reader
 * that composes the documents itself (suites keep the nodes for positions).
 */
export function yamlNestingProblem(text: string): string | undefined {
  const lexical = lexicalScan(text).problem;
  if (lexical) return lexical;
  const lines = new LineCounter();
  for (const token of new Parser(lines.addNewLine).parse(text)) {
    if (token.type === 'document' && cstDepth(token) > MAX_NESTING_DEPTH) {
      const pos = lines.linePos(token.offset);
      return tooDeep(`in the document at line ${pos.line}, column ${pos.col}`);
    }
  }
  return undefined;
}

/**
 * How many keys and documents a text may hold (what is left of a run's
 * budget, input-budget.ts), and the refusal to give when it holds more. The
 * lexer counts them before any node is built and stops at the first one
 * over, so an oversized file costs one partial lexing pass.
 */
export interface YamlAllowance {
  keys: number;
  documents: number;
  refuse: (counts: YamlCounts) => string;
  /** Told what the text held, when it is within the allowance. */
  spend: (counts: YamlCounts) => void;
}

/**
 * Every document of a YAML stream, as a plain value or the problem that
 * keeps it from being one ("invalid YAML at line 3, column 7: …"). Never
 * throws. A stream nested past the bound, or over its `allowance`, yields
 * that single problem.
 *
 * Documents are composed one at a time from the parser's tokens and turned
 * into plain values as they come, so the yaml package's nodes (~100x the
 * text) are held for one document, not for the whole stream.
 */
export function parseYamlDocuments(text: string, allowance?: YamlAllowance): YamlDocument[] {
  const quick = allowance ? plainPrefixCounts(text, allowance) : undefined;
  const scan = quick?.problem !== undefined ? quick : lexicalScan(text, allowance);
  if (scan.problem) return [{ ok: false, message: scan.problem }];
  allowance?.spend(scan);
  const lines = new LineCounter();
  const at = (offset: number): string => {
    const pos = lines.linePos(offset);
    return `line ${pos.line}, column ${pos.col}`;
  };
  let deep: string | undefined;
  // The depth of each document's CST is checked before the composer sees it (it composes recursively).
  function* checked(): Generator<CST.Token> {
    for (const token of new Parser(lines.addNewLine).parse(text)) {
      if (token.type === 'document' && cstDepth(token) > MAX_NESTING_DEPTH) {
        deep = tooDeep(`in the document at ${at(token.offset)}`);
        return;
      }
      yield token;
    }
  }
  const out: YamlDocument[] = [];
  // Warnings (e.g. a collection used as a key) must not go to the process's stderr.
  for (const doc of new Composer({ logLevel: 'error', uniqueKeys: false }).compose(checked())) {
    if (deep !== undefined) break;
    out.push(plainValue(doc, at));
  }
  return deep !== undefined ? [{ ok: false, message: deep }] : out;
}

function plainValue(doc: Document.Parsed, at: (offset: number) => string): YamlDocument {
  const first = doc.errors[0];
  if (first) return { ok: false, message: `invalid YAML at ${at(first.pos[0])}: ${first.message.split('\n')[0] ?? first.message}` };
  const duplicate = firstDuplicateKey(doc.contents);
  if (duplicate) return { ok: false, message: `invalid YAML at ${at(duplicate.range?.[0] ?? 0)}: Map keys must be unique` };
  try {
    return { ok: true, value: doc.toJS({ maxAliasCount: MAX_YAML_ALIASES }) };
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    return {
      ok: false,
      message: /alias/i.test(message)
        ? `YAML aliases expand past ${MAX_YAML_ALIASES} copies (an alias bomb?); write the values out or use fewer aliases`
        : `cannot read the YAML: ${message}`,
    };
  }
}

/** A file that holds one YAML document (`--config`, a chart's values): its value, or the problem. */
export function parseYamlDocument(text: string): YamlDocument {
  const docs = parseYamlDocuments(text);
  if (docs.length > 1 && docs.every((d) => d.ok)) return { ok: false, message: `holds ${docs.length} YAML documents; expected one` };
  return docs.find((d) => !d.ok) ?? docs[0] ?? { ok: true, value: null };
}

/**
 * Depth of a JSON text's nesting, from its brackets outside strings: checked
 * before JSON.parse, since the value is then walked recursively (lists are
 * flattened, rules validated and compiled). Linear, stops past the bound.
 * With it, the keys of the text (its `:` outside strings), for a budget.
 */
export function jsonScan(text: string): { problem?: string; keys: number } {
  let depth = 0;
  let line = 1;
  let keys = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x3a) keys++;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_NESTING_DEPTH) return { problem: tooDeep(`at line ${line}`), keys };
    } else if (c === 0x5d || c === 0x7d) depth = Math.max(0, depth - 1);
    else if (c === 0x0a) line++;
  }
  return { keys };
}
