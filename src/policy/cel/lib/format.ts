/**
 * Kubernetes' format library (1.31+, apiserver/pkg/cel/library/format.go):
 * `format.dns1123Label()` etc. and `format.named(name)` give a format whose
 * `validate(s)` returns optional.none() when `s` is valid, else an optional
 * list of error messages (apimachinery's wording).
 */
import { Optional, type Environment } from '@marcbachmann/cel-js';

export class Format {
  constructor(
    readonly name: string,
    readonly check: (s: string) => string[],
    /** The length of the regular expressions `validate` runs, for its cost (Kubernetes' `MaxRegexSize`). */
    readonly regexSize: number,
  ) {}
}

const LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const maxLen = (n: number) => (s: string): string[] => (s.length > n ? [`must be no more than ${n} characters`] : []);
function re(pattern: string, msg: string, example: string): (s: string) => string[] {
  const r = new RegExp(`^(?:${pattern})$`);
  return (s) => (r.test(s) ? [] : [`${msg} (e.g. ${example}, regex used for validation is '${pattern}')`]);
}
const all = (...fs: ((s: string) => string[])[]) => (s: string): string[] => fs.flatMap((f) => f(s));

const DNS1123_LABEL_MSG = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN = `${LABEL}(\\.${LABEL})*`;
const DNS1123_SUBDOMAIN_MSG = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035 = '[a-z]([-a-z0-9]*[a-z0-9])?';
const DNS1035_MSG = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const QNAME = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const LABEL_VALUE = '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?';
const prefixOf = (f: (s: string) => string[]) => (s: string): string[] => f(s.endsWith('-') ? s.slice(0, -1) + 'a' : s);

function qualifiedName(s: string): string[] {
  const parts = s.split('/');
  const errs: string[] = [];
  let name = s;
  if (parts.length === 2) {
    const [prefix = '', n = ''] = parts;
    name = n;
    if (prefix === '') errs.push('prefix part must be non-empty');
    else errs.push(...all(maxLen(253), re(DNS1123_SUBDOMAIN, DNS1123_SUBDOMAIN_MSG, "'example.com'"))(prefix).map((e) => `prefix part ${e}`));
  } else if (parts.length > 2) {
    return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"];
  }
  if (name === '') errs.push('name part must be non-empty');
  else if (name.length > 63) errs.push('name part must be no more than 63 characters');
  if (name !== '' && !new RegExp(`^${QNAME}$`).test(name)) {
    errs.push(`name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '${QNAME}')`);
  }
  return errs;
}

const dns1123Label = all(maxLen(63), re(LABEL, DNS1123_LABEL_MSG, "'my-name',  or '123-abc'"));
const dns1123Subdomain = all(maxLen(253), re(DNS1123_SUBDOMAIN, DNS1123_SUBDOMAIN_MSG, "'example.com'"));
const dns1035Label = all(maxLen(63), re(DNS1035, DNS1035_MSG, "'my-name',  or 'abc-123'"));

const FORMATS: Record<string, (s: string) => string[]> = {
  dns1123Label,
  dns1123Subdomain,
  dns1035Label,
  qualifiedName,
  dns1123LabelPrefix: prefixOf(dns1123Label),
  dns1123SubdomainPrefix: prefixOf(dns1123Subdomain),
  dns1035LabelPrefix: prefixOf(dns1035Label),
  labelValue: all(maxLen(63), re(LABEL_VALUE, "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", "'MyValue',  or 'my_value',  or '12345'")),
  uri: (s) => {
    try {
      new URL(s);
      return [];
    } catch {
      return s.startsWith('/') ? [] : ['must be a valid URI'];
    }
  },
  uuid: re('[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', 'does not match the UUID format', "'123e4567-e89b-12d3-a456-426614174000'"),
  byte: (s) => (/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(s) ? [] : ['invalid base64']),
  date: (s) => (/^\d{4}-\d{2}-\d{2}$/.test(s) && !Number.isNaN(Date.parse(`${s}T00:00:00Z`)) ? [] : ['not a valid date: expected YYYY-MM-DD']),
  datetime: (s) =>
    /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.test(s) && !Number.isNaN(Date.parse(s)) ? [] : ['not a valid date-time: expected RFC 3339'],
};

/**
 * Per format, the total length of the patterns its check runs (cost.ts's
 * regex size); the formats checked without a pattern of ours (uri) count
 * as one as long as the longest.
 */
const REGEX_SIZE: Record<string, number> = {
  dns1123Label: LABEL.length,
  dns1123Subdomain: DNS1123_SUBDOMAIN.length,
  dns1035Label: DNS1035.length,
  qualifiedName: DNS1123_SUBDOMAIN.length + QNAME.length,
  dns1123LabelPrefix: LABEL.length,
  dns1123SubdomainPrefix: DNS1123_SUBDOMAIN.length,
  dns1035LabelPrefix: DNS1035.length,
  labelValue: LABEL_VALUE.length,
};
const DEFAULT_REGEX_SIZE = 96;

export function registerFormat(env: Environment): void {
  env.registerType('Format', Format);
  for (const [name, check] of Object.entries(FORMATS)) {
    const f = new Format(name, check, REGEX_SIZE[name] ?? DEFAULT_REGEX_SIZE);
    env.registerFunction(`format_${name}(): Format`, () => f);
  }
  env.registerFunction('format_named(string): optional<Format>', (name: string) => {
    const check = Object.prototype.hasOwnProperty.call(FORMATS, name) ? FORMATS[name] : undefined;
    return check ? Optional.of(new Format(name, check, REGEX_SIZE[name] ?? DEFAULT_REGEX_SIZE)) : Optional.none();
  });
  env.registerFunction('Format.validate(string): optional<list<string>>', (f: Format, s: string) => {
    const errs = f.check(s);
    return errs.length === 0 ? Optional.none() : Optional.of(errs);
  });
}
