/**
 * The CEL cost model: what each library function charges, as a pure function
 * of the sizes of its inputs. One module, so that the interpreter-backed
 * engine (charges.ts maps cel-js values onto these) and a code generator
 * (issue 19) charge the same units.
 *
 * Units are the API server's (cel-go `interpreter/runtimecost.go` and
 * Kubernetes' `apiserver/pkg/cel/library/cost.go`): the limits are 1,000,000
 * per expression evaluation and 10,000,000 per request, and one unit is
 * roughly 50 ns of CPU in Go (kubernetes#108595). Every node evaluation, a
 * function call included, costs 1 unit (meter.ts); the functions here return
 * what a call costs ON TOP of that, charged BEFORE the call does its work, so
 * a call that would exceed the limit never starts (a `sets.contains` on two
 * 30,000-element lists costs 900,000,000 units and is refused at once).
 *
 * Where Portal deviates from cel-go, it charges more, never less, and only
 * where the JavaScript implementation does more work than Go's: each such
 * place says so ("deviation").
 */

/** cel-go `common.StringTraversalCostFactor`: walking n characters costs ceil(0.1·n). */
export const STRING_TRAVERSAL_FACTOR = 0.1;
/**
 * cel-go `common.RegexStringLengthCostFactor`: a regex of n characters counts
 * as ceil(0.25·n) "expressions" ("each expression in a regex is typically at
 * least 4 chars in length").
 */
export const REGEX_STRING_LENGTH_FACTOR = 0.25;

/** ceil(0.1·n): the cost of walking n characters (or elements, where cel-go says so). */
export function traversal(n: number): number {
  return n <= 0 ? 0 : Math.ceil(n * STRING_TRAVERSAL_FACTOR);
}

/**
 * The size of a regex for its cost: cel-go uses the pattern's length; Portal
 * also knows the compiled program's size (RE2 instructions), which is what
 * matching time is proportional to, and takes the larger (deviation: a short
 * pattern such as `[a-z]{1000}` compiles to a large program).
 */
export function regexSize(patternLength: number, programSize = 0): number {
  return Math.max(patternLength, programSize);
}

/** Per-call costs, in units on top of the call's own 1. Arguments are sizes (characters, elements). */
export const costOf = {
  /**
   * `s.contains(sub)`: cel-go charges the product of both traversals.
   */
  contains(stringLength: number, substringLength: number): number {
    return traversal(stringLength) * traversal(substringLength);
  },
  /** `s.startsWith(p)`, `s.endsWith(p)`: cel-go charges the traversal of the prefix or suffix. */
  startsWith(prefixLength: number): number {
    return traversal(prefixLength);
  },
  endsWith(suffixLength: number): number {
    return traversal(suffixLength);
  },
  /**
   * Functions that walk one string once (Kubernetes' library: url,
   * lowerAscii, upperAscii, substring, trim, quantity, ip, cidr, isIP,
   * isCIDR, semver, isSemver, indexOf/lastIndexOf on strings; cel-go:
   * strings.quote, string ↔ bytes). Portal charges the same for the other
   * functions that walk their input in JavaScript: charAt, reverse,
   * base64, int/uint/double/duration from a string, and `size()` of a
   * string (counts code points) or of a map held as a JS object (counts its
   * keys), which are O(1) in Go (deviation).
   */
  stringTraversal(length: number): number {
    return traversal(length);
  },
  /** `ip.isCanonical(s)`: parse, then compare (Kubernetes: twice the traversal). */
  ipIsCanonical(length: number): number {
    return traversal(2 * length);
  },
  /** `cidr.containsIP(x)`, `cidr.containsCIDR(x)`: both operands' sizes (Kubernetes). */
  containsAddress(cidrLength: number, otherLength: number): number {
    return traversal(cidrLength + otherLength);
  },
  /**
   * `s.split(sep[, n])`: Kubernetes charges the traversal plus the
   * construction of the result, 2 × 0.1 × |s|; the result never holds more
   * characters than `s`.
   */
  split(stringLength: number): number {
    return traversal(2 * stringLength);
  },
  /**
   * `s.replace(from, to[, n])`: Kubernetes charges 2 × 0.1 × |s| (traverse,
   * then build). The result can be longer than `s` (each replacement adds
   * |to| − |from|; an empty `from` matches |s| + 1 times), and building a
   * 1 GB string is work too: Portal charges the input plus the largest
   * result possible, which is Kubernetes' figure whenever the result cannot
   * be longer than the input. `limit` < 0: no limit.
   */
  replace(stringLength: number, fromLength: number, toLength: number, limit = -1): number {
    const possible = fromLength === 0 ? stringLength + 1 : Math.floor(stringLength / fromLength);
    const count = limit < 0 ? possible : Math.min(limit, possible);
    const longest = stringLength + count * Math.max(0, toLength - fromLength);
    return traversal(stringLength + Math.max(stringLength, longest));
  },
  /** `list.join([sep])`: Kubernetes charges 2 × 0.1 × |result| (Portal knows |result| before joining). */
  join(resultLength: number): number {
    return traversal(2 * resultLength);
  },
  /**
   * `fmt.format(args)`: cel-go charges the traversal of the format string;
   * Portal also walks the arguments to print them (deviation), so it adds
   * their traversal ({@link aggregateTraversal} units).
   */
  format(formatLength: number, argumentsTraversal: number): number {
    return traversal(formatLength) + argumentsTraversal;
  },
  /**
   * `s.matches(re)`, `s.find(re)`, `s.findAll(re[, n])`, and
   * `format.validate(s)` (whose regex size is its pattern's): cel-go's
   * ceil(0.1 × (1 + |s|)) × ceil(0.25 × regex size); the 1 keeps an empty
   * string from making an expensive regex free. See {@link regexSize}.
   */
  regex(stringLength: number, size: number): number {
    return Math.ceil((1 + stringLength) * STRING_TRAVERSAL_FACTOR) * Math.ceil(size * REGEX_STRING_LENGTH_FACTOR);
  },
  /**
   * `sets.contains(a, b)`, `sets.equivalent(a, b)`, `sets.intersects(a, b)`:
   * cel-go (ext/sets.go) charges the product of the two lists' sizes (every
   * element of one may be compared with every element of the other). For
   * lists of lists or maps, Portal counts the elements inside
   * ({@link aggregateElements}), since each comparison walks them (deviation
   * only there).
   */
  sets(aElements: number, bElements: number): number {
    return aElements * bElements;
  },
  /**
   * `a == b`, `a != b` on strings and bytes, and `<`, `<=`, `>`, `>=` on
   * strings and bytes: cel-go charges the traversal of the shorter operand.
   * On lists and maps, cel-go charges 0.1 × the number of top-level elements
   * of the smaller; Portal charges the smaller one's full
   * {@link aggregateTraversal} instead (deviation), because comparing walks
   * nested lists and maps too (a map of 16,000-element lists is "small" at
   * the top).
   */
  compareStrings(aLength: number, bLength: number): number {
    return traversal(Math.min(aLength, bLength));
  },
  equalsAggregates(aTraversal: number, bTraversal: number): number {
    return Math.min(aTraversal, bTraversal);
  },
  /**
   * `x in list`: cel-go charges the list's size (one comparison per
   * element); when `x` is itself a list or map each comparison may walk it,
   * so Portal multiplies by its traversal (deviation only there). `x in map`
   * is a lookup: 0.
   */
  inList(listSize: number, elementTraversal = 1): number {
    return listSize * Math.max(1, elementTraversal);
  },
  /**
   * `a + b` on strings and bytes: cel-go charges the traversal of both. On
   * lists cel-go charges nothing (its lists are lists of lists); a
   * JavaScript concatenation copies both, so Portal charges their traversal
   * too (deviation).
   */
  concat(aSize: number, bSize: number): number {
    return traversal(aSize + bSize);
  },
  /**
   * Kubernetes' list library (isSorted, sum, min, max, indexOf,
   * lastIndexOf): one traversal of the list, `traversalCost` in
   * library/cost.go ({@link aggregateTraversal}).
   */
  listTraversal(listTraversal: number): number {
    return listTraversal;
  },
  /**
   * A comprehension (`all`, `exists`, `map`, …) over a map held as a
   * JavaScript object lists its keys first: a traversal of the key count
   * (deviation: Go iterates lazily). Each iteration is charged by the nodes
   * it evaluates, as in cel-go.
   */
  mapRange(keyCount: number): number {
    return traversal(keyCount);
  },
} as const;

/**
 * How many units walking a value costs, in the spirit of Kubernetes'
 * `traversalCost` (library/cost.go): a string or bytes ceil(0.1 × length)
 * (at least 1), a scalar 1, a list the sum of its elements, a map the sum of
 * its keys and values. Walks at most until the sum exceeds `cap` (then
 * returns a number > cap), iteratively, so a hostile value costs neither
 * more time than the budget it is checked against nor stack.
 */
export function aggregateTraversal(value: unknown, cap = Number.POSITIVE_INFINITY): number {
  return measure(value, cap, true);
}

/**
 * How many elements a value holds, counting a string as one (the measure of
 * {@link costOf.sets}): a scalar or string 1, a list the sum of its
 * elements (at least 1), a map its entries plus their values' elements.
 */
export function aggregateElements(value: unknown, cap = Number.POSITIVE_INFINITY): number {
  return measure(value, cap, false);
}

function measure(root: unknown, cap: number, strings: boolean): number {
  let total = 0;
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      total += strings ? Math.max(1, traversal(v.length)) : 1;
    } else if (v instanceof Uint8Array) {
      total += strings ? Math.max(1, traversal(v.length)) : 1;
    } else if (Array.isArray(v)) {
      if (v.length === 0) total += 1;
      if (total + stack.length + v.length > cap) return total + stack.length + v.length;
      for (let i = 0; i < v.length; i++) stack.push(v[i]);
    } else if (v instanceof Map) {
      if (v.size === 0) total += 1;
      for (const [k, x] of v) stack.push(k, x);
    } else if (v instanceof Set) {
      if (v.size === 0) total += 1;
      for (const x of v) stack.push(x);
    } else if (v !== null && typeof v === 'object' && isPlainMap(v)) {
      let empty = true;
      for (const k in v) {
        if (!Object.hasOwn(v, k)) continue;
        empty = false;
        stack.push(k, (v as Record<string, unknown>)[k]);
      }
      if (empty) total += 1;
    } else {
      total += 1;
    }
    // Every value still on the stack adds at least 1: stop as soon as the
    // total must exceed the cap, so the walk is bounded by the cap too.
    if (total + stack.length > cap) return total + stack.length;
  }
  return total;
}

/** A CEL map held as a plain object (Portal's JSON values), as opposed to a message or a library type. */
function isPlainMap(v: object): boolean {
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === null || proto === Object.prototype;
}
