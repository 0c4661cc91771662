/**
 * One budget for all the manifests of a `portal test` run: bytes read,
 * YAML documents and map keys, summed across files (issue 31). Each file is
 * bounded on its own too (16 MiB, manifests.ts), but a run kept every file's
 * objects: three 12 MB files used 2.2 GB. Keys are what memory follows (a
 * parsed key costs ~100 bytes as a plain value, several hundred while the
 * yaml package builds its nodes), and they are counted by the lexer before
 * any node is built, so a file that crosses the budget costs one partial
 * lexing pass: a 16 MiB map of 1.4M keys is refused within seconds.
 *
 * The first file that crosses is named with what it crossed; the files
 * after it are not read (the run ends with exit 2, nothing evaluated).
 */
import { mib } from './read-file.ts';
import type { YamlAllowance, YamlCounts } from './yaml.ts';

export interface InputLimits {
  /** Bytes of all files together. */
  maxBytes: number;
  /** YAML documents (a JSON file counts one) of all files together. */
  maxDocuments: number;
  /** Map keys of all files together. */
  maxKeys: number;
}

/**
 * 64 MiB, 100,000 documents, 1,000,000 keys: `helm template` of a large
 * platform (hundreds of objects, a few MB) is far below each; a million
 * keys is ~60 MB of Pods (9 keys each) and peaks below 1 GB while parsing.
 */
export const RUN_INPUT_LIMITS: Readonly<InputLimits> = Object.freeze({
  maxBytes: 64 * 1024 * 1024,
  maxDocuments: 100_000,
  maxKeys: 1_000_000,
});

const count = (n: number): string => n.toLocaleString('en-US');

export class InputBudget {
  readonly #limits: Readonly<InputLimits>;
  #bytes = 0;
  #documents = 0;
  #keys = 0;
  #crossed = false;

  constructor(limits: Readonly<InputLimits> = RUN_INPUT_LIMITS) {
    this.#limits = limits;
  }

  /** A file crossed the budget: the rest are not read. */
  get crossed(): boolean {
    return this.#crossed;
  }

  #refuse(what: string): string {
    this.#crossed = true;
    const l = this.#limits;
    return `${what}, over what all inputs of one run may hold together (${mib(l.maxBytes)}, ${count(l.maxDocuments)} documents, ${count(l.maxKeys)} map keys); nothing after it was read: test fewer or smaller files per run`;
  }

  /** Charges a file's bytes: the refusal (completing "FILE: ") when they take the run past its bytes. */
  chargeBytes(bytes: number): string | undefined {
    this.#bytes += bytes;
    if (this.#bytes <= this.#limits.maxBytes) return undefined;
    return this.#refuse(`brings the files read to ${mib(this.#bytes)}`);
  }

  /** What one YAML text may still hold (its counts are charged once it is within them); the refusal names the count it crossed. */
  allowance(): YamlAllowance {
    const keysBefore = this.#keys;
    const documentsBefore = this.#documents;
    return {
      keys: this.#limits.maxKeys - keysBefore,
      documents: this.#limits.maxDocuments - documentsBefore,
      refuse: (c) =>
        this.#refuse(
          keysBefore + c.keys > this.#limits.maxKeys
            ? `holds more than ${count(c.keys - 1)} map keys (after ${count(keysBefore)} in the files before it)`
            : `holds more than ${count(c.documents - 1)} YAML documents (after ${count(documentsBefore)} in the files before it)`,
        ),
      spend: (c) => {
        this.#keys += c.keys;
        this.#documents += c.documents;
      },
    };
  }

  /** Charges what a JSON file held: the refusal when it crosses. */
  charge(counts: YamlCounts): string | undefined {
    const allowance = this.allowance();
    if (counts.keys <= allowance.keys && counts.documents <= allowance.documents) {
      allowance.spend(counts);
      return undefined;
    }
    return allowance.refuse(counts);
  }
}
