/**
 * `Accept: application/json;as=Table;g=meta.k8s.io;v=v1` responses, which
 * `kubectl get` asks for: Name, the printer columns, Age. Pods get the
 * computed columns of kube-apiserver's own pod printer instead (READY STATUS
 * RESTARTS AGE), which no JSONPath can express.
 */
import type { PrinterColumn, ResourceDef } from './registry.ts';
import { isPlainObject, meta, type Obj } from './types.ts';

export function wantsTable(accept: string | undefined): boolean {
  return !!accept && /as=Table/.test(accept.split(',')[0] ?? '');
}

/** Human age as kubectl prints it (duration.HumanDuration, simplified). */
export function humanAge(ts: unknown, now = Date.now()): string {
  if (typeof ts !== 'string') return '<unknown>';
  const s = Math.max(0, Math.floor((now - Date.parse(ts)) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m}m${s % 60 ? `${s % 60}s` : ''}`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

/**
 * The JSONPath subset printer columns use: `.a.b[0].c` and the filter form
 * `.status.conditions[?(@.type=="Ready")].status` (first match, as kubectl
 * prints a single value per cell).
 */
function evalPath(o: unknown, path: string): unknown {
  const tokens = path.replace(/^\{?\.?/, '').replace(/\}$/, '').match(/\[\?\(@\.[^)]*\)\]|\[\d+\]|[^.[\]]+/g) ?? [];
  let cur = o;
  for (const t of tokens) {
    const filter = /^\[\?\(@\.([\w.-]+)\s*==\s*(?:"([^"]*)"|'([^']*)')\)\]$/.exec(t);
    if (filter) {
      if (!Array.isArray(cur)) return undefined;
      const [, field = '', dq, sq] = filter;
      const want = dq ?? sq;
      cur = cur.find((item) => isPlainObject(item) && String(evalPath(item, field)) === want);
      continue;
    }
    const index = /^\[(\d+)\]$/.exec(t);
    if (index) {
      if (!Array.isArray(cur)) return undefined;
      cur = cur[Number(index[1])];
    } else if (isPlainObject(cur)) cur = cur[t];
    else return undefined;
  }
  return cur;
}

function cell(col: PrinterColumn, o: Obj): unknown {
  const v = evalPath(o, col.jsonPath);
  if (col.type === 'date') return v === undefined ? '<unknown>' : humanAge(v);
  if (v === undefined || v === null) return col.type === 'string' ? '' : null;
  return typeof v === 'object' ? JSON.stringify(v) : v;
}

const isCorePods = (def: ResourceDef): boolean => def.group === '' && def.resource === 'pods';

/** kube-apiserver's pod columns (pkg/printers/internalversion), the default-priority ones. */
const POD_COLUMNS: readonly PrinterColumn[] = [
  { name: 'Ready', type: 'string', jsonPath: '', description: 'The aggregate readiness state of this pod for accepting traffic.' },
  { name: 'Status', type: 'string', jsonPath: '', description: 'The aggregate status of the containers in this pod.' },
  { name: 'Restarts', type: 'string', jsonPath: '', description: 'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.' },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'CreationTimestamp is a timestamp representing the server time when this object was created.' },
];

const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isPlainObject) : []);

/** READY, STATUS, RESTARTS, AGE of a pod, as `kubectl get pods` shows them on a real cluster. */
function podCells(o: Obj, now = Date.now()): unknown[] {
  const spec = isPlainObject(o['spec']) ? o['spec'] : {};
  const status = isPlainObject(o['status']) ? o['status'] : {};
  const statuses = list(status['containerStatuses']);
  // Total is the declared containers (the kubelet may not have reported yet: 0/N).
  const total = list(spec['containers']).length;
  const ready = statuses.filter((c) => c['ready'] === true).length;
  const restarts = statuses.reduce((sum, c) => sum + (typeof c['restartCount'] === 'number' ? c['restartCount'] : 0), 0);
  const m = meta(o);
  let phase = typeof status['reason'] === 'string' && status['reason'] ? status['reason'] : typeof status['phase'] === 'string' ? status['phase'] : '';
  if (m.deletionTimestamp) phase = 'Terminating';
  return [`${ready}/${total}`, phase, String(restarts), humanAge(m.creationTimestamp, now)];
}

function columnsOf(def: ResourceDef): readonly PrinterColumn[] {
  return isCorePods(def) ? POD_COLUMNS : def.columns;
}

function columnDefs(def: ResourceDef): Obj[] {
  return [
    { name: 'Name', type: 'string', format: 'name', description: 'Name must be unique within a namespace.', priority: 0 },
    ...columnsOf(def).map((c) => ({ name: c.name, type: c.type === 'date' ? 'string' : c.type, format: c.format ?? '', description: c.description ?? '', priority: c.priority ?? 0 })),
  ];
}

function row(def: ResourceDef, o: Obj, includeObject: string): Obj {
  const m = meta(o);
  const object = includeObject === 'Object' ? o
    : includeObject === 'None' ? undefined
      : { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: m };
  const r: Obj = { cells: [m.name, ...(isCorePods(def) ? podCells(o) : def.columns.map((c) => cell(c, o)))] };
  if (object) r['object'] = object;
  return r;
}

export function toTable(def: ResourceDef, items: Obj[], listMeta: Obj, includeObject: string, withColumns = true): Obj {
  const t: Obj = { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: listMeta, rows: items.map((o) => row(def, o, includeObject)) };
  if (withColumns) t['columnDefinitions'] = columnDefs(def);
  return t;
}
