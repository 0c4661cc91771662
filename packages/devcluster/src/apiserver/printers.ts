/**
 * kube-apiserver's table printers for the built-in kinds kubectl users look
 * at most (pkg/printers/internalversion/printers.go): the same columns in
 * the same order, with priority 1 for the ones only `-o wide` shows, and the
 * same computed cells (READY "1/3", PORT(S) "80/TCP", SELECTOR, "<none>").
 */
import { humanAge, humanDurationMs } from './age.ts';
import { isPlainObject, meta, type Obj } from './types.ts';

export interface ColumnDef {
  name: string;
  type: 'string' | 'integer' | 'boolean';
  description: string;
  /** 1: shown only by `-o wide`. */
  priority: 0 | 1;
}

export interface Printer {
  columns: readonly ColumnDef[];
  cells(o: Obj, now: number): unknown[];
}

const NONE = '<none>';
const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isPlainObject) : []);
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});
const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

const col = (name: string, type: ColumnDef['type'], description: string, priority: 0 | 1 = 0): ColumnDef => ({ name, type, description, priority });
const NAME = col('Name', 'string', 'Name must be unique within a namespace.');
const AGE = col('Age', 'string', 'CreationTimestamp is a timestamp representing the server time when this object was created.');
const CONTAINERS = col('Containers', 'string', 'Names of each container in the template.', 1);
const IMAGES = col('Images', 'string', 'Images referenced by each container in the template.', 1);
const SELECTOR = col('Selector', 'string', 'Label selector for pods.', 1);

const age = (o: Obj, now: number): string => humanAge(meta(o).creationTimestamp, now);

function podSpecOf(template: unknown): Obj {
  return obj(obj(template)['spec']);
}

function containerCells(podSpec: Obj): [string, string] {
  const cs = list(podSpec['containers']);
  return [cs.map((c) => str(c['name'])).join(','), cs.map((c) => str(c['image'])).join(',')];
}

/** metav1.FormatLabelSelector. */
export function formatLabelSelector(sel: unknown): string {
  if (!isPlainObject(sel)) return NONE;
  const parts: string[] = [];
  for (const [k, v] of Object.entries(obj(sel['matchLabels'])).sort(([a], [b]) => a.localeCompare(b))) parts.push(`${k}=${String(v)}`);
  for (const e of list(sel['matchExpressions'])) {
    const key = str(e['key']);
    const values = Array.isArray(e['values']) ? (e['values'] as unknown[]).map(String).sort() : [];
    switch (e['operator']) {
      case 'In': parts.push(`${key} in (${values.join(',')})`); break;
      case 'NotIn': parts.push(`${key} notin (${values.join(',')})`); break;
      case 'Exists': parts.push(key); break;
      case 'DoesNotExist': parts.push(`!${key}`); break;
      default: break;
    }
  }
  return parts.length ? parts.join(',') : NONE;
}

/** A plain map selector (Service, ReplicationController): "k=v,..." sorted. */
function formatMap(m: unknown): string {
  const entries = Object.entries(obj(m)).sort(([a], [b]) => a.localeCompare(b));
  return entries.length ? entries.map(([k, v]) => `${k}=${String(v)}`).join(',') : NONE;
}

// ---- pods ------------------------------------------------------------------

function podStatus(o: Obj): string {
  const status = obj(o['status']);
  const spec = obj(o['spec']);
  let reason = str(status['reason']) || str(status['phase']);
  const initStatuses = list(status['initContainerStatuses']);
  const initCount = list(spec['initContainers']).length;
  let initializing = false;
  for (const [i, c] of initStatuses.entries()) {
    const state = obj(c['state']);
    const terminated = obj(state['terminated']);
    const waiting = obj(state['waiting']);
    if (isPlainObject(state['terminated']) && num(terminated['exitCode']) === 0) continue;
    if (isPlainObject(state['terminated'])) {
      reason = str(terminated['reason']) ? `Init:${str(terminated['reason'])}` : `Init:ExitCode:${num(terminated['exitCode'])}`;
    } else if (str(waiting['reason']) && waiting['reason'] !== 'PodInitializing') {
      reason = `Init:${str(waiting['reason'])}`;
    } else reason = `Init:${i}/${initCount}`;
    initializing = true;
    break;
  }
  if (!initializing) {
    let hasRunning = false;
    const statuses = list(status['containerStatuses']);
    for (let i = statuses.length - 1; i >= 0; i--) {
      const state = obj(statuses[i]!['state']);
      const waiting = obj(state['waiting']);
      const terminated = obj(state['terminated']);
      if (str(waiting['reason'])) reason = str(waiting['reason']);
      else if (str(terminated['reason'])) reason = str(terminated['reason']);
      else if (isPlainObject(state['terminated'])) {
        reason = num(terminated['signal']) !== 0 ? `Signal:${num(terminated['signal'])}` : `ExitCode:${num(terminated['exitCode'])}`;
      } else if (isPlainObject(state['running']) && statuses[i]!['ready'] === true) hasRunning = true;
    }
    if (reason === 'Completed' && hasRunning) reason = 'Running';
  }
  if (meta(o).deletionTimestamp) reason = status['reason'] === 'NodeLost' ? 'Unknown' : 'Terminating';
  return reason;
}

const POD: Printer = {
  columns: [
    NAME,
    col('Ready', 'string', 'The aggregate readiness state of this pod for accepting traffic.'),
    col('Status', 'string', 'The aggregate status of the containers in this pod.'),
    col('Restarts', 'string', 'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.'),
    AGE,
    col('IP', 'string', 'IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.', 1),
    col('Node', 'string', "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply schedules this pod onto that node, assuming that it fits resource requirements.", 1),
    col('Nominated Node', 'string', 'nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods.', 1),
    col('Readiness Gates', 'string', 'If specified, all readiness gates will be evaluated for pod readiness.', 1),
  ],
  cells(o, now) {
    const spec = obj(o['spec']);
    const status = obj(o['status']);
    const statuses = list(status['containerStatuses']);
    // Total is the declared containers (the kubelet may not have reported yet: 0/N).
    const total = list(spec['containers']).length;
    const ready = statuses.filter((c) => c['ready'] === true).length;
    const restarts = statuses.reduce((sum, c) => sum + num(c['restartCount']), 0);
    const gates = list(spec['readinessGates']);
    let gateCell = NONE;
    if (gates.length > 0) {
      const conditions = list(status['conditions']);
      const trueGates = gates.filter((g) => conditions.some((c) => c['type'] === g['conditionType'] && c['status'] === 'True')).length;
      gateCell = `${trueGates}/${gates.length}`;
    }
    return [meta(o).name, `${ready}/${total}`, podStatus(o), String(restarts), age(o, now),
      str(status['podIP']) || NONE, str(spec['nodeName']) || NONE, str(status['nominatedNodeName']) || NONE, gateCell];
  },
};

// ---- workloads ---------------------------------------------------------------

const DEPLOYMENT: Printer = {
  columns: [
    NAME,
    col('Ready', 'string', 'Number of the pod with ready state'),
    col('Up-to-date', 'string', 'Total number of non-terminated pods targeted by this deployment that have the desired template spec.'),
    col('Available', 'string', 'Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.'),
    AGE, CONTAINERS, IMAGES, SELECTOR,
  ],
  cells(o, now) {
    const spec = obj(o['spec']);
    const status = obj(o['status']);
    const desired = typeof spec['replicas'] === 'number' ? spec['replicas'] : 1;
    return [meta(o).name, `${num(status['readyReplicas'])}/${desired}`, num(status['updatedReplicas']), num(status['availableReplicas']), age(o, now),
      ...containerCells(podSpecOf(spec['template'])), formatLabelSelector(spec['selector'])];
  },
};

const REPLICASET: Printer = {
  columns: [
    NAME,
    col('Desired', 'integer', 'Number of desired pods.'),
    col('Current', 'integer', 'Number of actual pods.'),
    col('Ready', 'integer', 'Number of pods ready.'),
    AGE, CONTAINERS, IMAGES, SELECTOR,
  ],
  cells(o, now) {
    const spec = obj(o['spec']);
    const status = obj(o['status']);
    const desired = typeof spec['replicas'] === 'number' ? spec['replicas'] : 1;
    return [meta(o).name, desired, num(status['replicas']), num(status['readyReplicas']), age(o, now),
      ...containerCells(podSpecOf(spec['template'])), formatLabelSelector(spec['selector'])];
  },
};

const STATEFULSET: Printer = {
  columns: [NAME, col('Ready', 'string', 'Number of the pod with ready state'), AGE, CONTAINERS, IMAGES],
  cells(o, now) {
    const spec = obj(o['spec']);
    const status = obj(o['status']);
    const desired = typeof spec['replicas'] === 'number' ? spec['replicas'] : 1;
    return [meta(o).name, `${num(status['readyReplicas'])}/${desired}`, age(o, now), ...containerCells(podSpecOf(spec['template']))];
  },
};

const DAEMONSET: Printer = {
  columns: [
    NAME,
    col('Desired', 'integer', 'The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).'),
    col('Current', 'integer', 'The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.'),
    col('Ready', 'integer', 'numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.'),
    col('Up-to-date', 'integer', 'The total number of nodes that are running updated daemon pod'),
    col('Available', 'integer', 'The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)'),
    col('Node Selector', 'string', 'NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node\'s labels for the pod to be scheduled on that node.'),
    AGE, CONTAINERS, IMAGES, SELECTOR,
  ],
  cells(o, now) {
    const spec = obj(o['spec']);
    const status = obj(o['status']);
    const podSpec = podSpecOf(spec['template']);
    return [meta(o).name, num(status['desiredNumberScheduled']), num(status['currentNumberScheduled']), num(status['numberReady']),
      num(status['updatedNumberScheduled']), num(status['numberAvailable']), formatMap(podSpec['nodeSelector']), age(o, now),
      ...containerCells(podSpec), formatLabelSelector(spec['selector'])];
  },
};

function conditionTrue(status: Obj, type: string): boolean {
  return list(status['conditions']).some((c) => c['type'] === type && c['status'] === 'True');
}


const JOB: Printer = {
  columns: [
    NAME,
    col('Status', 'string', 'Status of the job.'),
    col('Completions', 'string', 'The completion status of the job.'),
    col('Duration', 'string', 'Time required to complete the job.'),
    AGE, CONTAINERS, IMAGES, SELECTOR,
  ],
  cells(o, now) {
    const spec = obj(o['spec']);
    const status = obj(o['status']);
    let completions: string;
    if (typeof spec['completions'] === 'number') completions = `${num(status['succeeded'])}/${spec['completions']}`;
    else {
      const parallelism = typeof spec['parallelism'] === 'number' ? spec['parallelism'] : 0;
      completions = parallelism > 1 ? `${num(status['succeeded'])}/1 of ${parallelism}` : `${num(status['succeeded'])}/1`;
    }
    let duration = '';
    const start = Date.parse(str(status['startTime']));
    if (!Number.isNaN(start)) {
      const end = Date.parse(str(status['completionTime']));
      duration = humanDurationMs(Math.max(0, (Number.isNaN(end) ? now : end) - start));
    }
    let state = 'Running';
    if (conditionTrue(status, 'Complete')) state = 'Complete';
    else if (conditionTrue(status, 'Failed')) state = 'Failed';
    else if (meta(o).deletionTimestamp) state = 'Terminating';
    else if (conditionTrue(status, 'SuccessCriteriaMet')) state = 'SuccessCriteriaMet';
    else if (conditionTrue(status, 'FailureTarget')) state = 'FailureTarget';
    else if (conditionTrue(status, 'Suspended')) state = 'Suspended';
    return [meta(o).name, state, completions, duration, age(o, now), ...containerCells(podSpecOf(spec['template'])), formatLabelSelector(spec['selector'])];
  },
};

const CRONJOB: Printer = {
  columns: [
    NAME,
    col('Schedule', 'string', 'The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.'),
    col('Timezone', 'string', 'The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.'),
    col('Suspend', 'boolean', 'This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.'),
    col('Active', 'integer', 'A list of pointers to currently running jobs.'),
    col('Last Schedule', 'string', 'Information when was the last time the job was successfully scheduled.'),
    AGE, CONTAINERS, IMAGES, SELECTOR,
  ],
  cells(o, now) {
    const spec = obj(o['spec']);
    const status = obj(o['status']);
    const jobSpec = obj(obj(spec['jobTemplate'])['spec']);
    const last = str(status['lastScheduleTime']);
    return [meta(o).name, str(spec['schedule']), str(spec['timeZone']) || NONE, spec['suspend'] === true ? 'True' : 'False',
      list(status['active']).length, last ? humanAge(last, now) : NONE, age(o, now),
      ...containerCells(podSpecOf(jobSpec['template'])), formatLabelSelector(jobSpec['selector'])];
  },
};

// ---- services and the rest ----------------------------------------------------

function externalIp(spec: Obj, status: Obj): string {
  const type = str(spec['type']) || 'ClusterIP';
  const external = Array.isArray(spec['externalIPs']) ? (spec['externalIPs'] as unknown[]).map(String) : [];
  const ingress = list(obj(status['loadBalancer'])['ingress']).map((i) => str(i['ip']) || str(i['hostname'])).filter(Boolean);
  switch (type) {
    case 'ClusterIP':
    case 'NodePort':
      return external.length ? external.join(',') : NONE;
    case 'LoadBalancer': {
      const all = [...ingress, ...external];
      return all.length ? all.join(',') : '<pending>';
    }
    case 'ExternalName':
      return str(spec['externalName']);
    default:
      return '<unknown>';
  }
}

function servicePorts(spec: Obj): string {
  const ports = list(spec['ports']);
  if (ports.length === 0) return NONE;
  return ports.map((p) => `${num(p['port'])}${typeof p['nodePort'] === 'number' && p['nodePort'] ? `:${p['nodePort']}` : ''}/${str(p['protocol']) || 'TCP'}`).join(',');
}

const SERVICE: Printer = {
  columns: [
    NAME,
    col('Type', 'string', 'type determines how the Service is exposed.'),
    col('Cluster-IP', 'string', 'clusterIP is the IP address of the service and is usually assigned randomly.'),
    col('External-IP', 'string', 'externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.'),
    col('Port(s)', 'string', 'The list of ports that are exposed by this service.'),
    AGE,
    col('Selector', 'string', 'Route service traffic to pods with label keys and values matching this selector.', 1),
  ],
  cells(o, now) {
    const spec = obj(o['spec']);
    return [meta(o).name, str(spec['type']) || 'ClusterIP', str(spec['clusterIP']) || NONE, externalIp(spec, obj(o['status'])), servicePorts(spec), age(o, now), formatMap(spec['selector'])];
  },
};

const CONFIGMAP: Printer = {
  columns: [NAME, col('Data', 'integer', 'Data contains the configuration data.'), AGE],
  cells: (o, now) => [meta(o).name, Object.keys(obj(o['data'])).length + Object.keys(obj(o['binaryData'])).length, age(o, now)],
};

const SECRET: Printer = {
  columns: [NAME, col('Type', 'string', 'The type of the secret'), col('Data', 'integer', 'Data contains the secret data.'), AGE],
  cells: (o, now) => [meta(o).name, str(o['type']), Object.keys(obj(o['data'])).length, age(o, now)],
};

const SERVICEACCOUNT: Printer = {
  columns: [NAME, col('Secrets', 'string', 'Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.'), AGE],
  cells: (o, now) => [meta(o).name, list(o['secrets']).length, age(o, now)],
};

const LEASE: Printer = {
  columns: [NAME, col('Holder', 'string', 'holderIdentity contains the identity of the holder of a current lease.'), AGE],
  cells: (o, now) => [meta(o).name, str(obj(o['spec'])['holderIdentity']), age(o, now)],
};

const PDB: Printer = {
  columns: [
    NAME,
    col('Min Available', 'string', 'The minimum number of pods that must be available simultaneously.  This can be either an integer or a percentage.'),
    col('Max Unavailable', 'string', 'The maximum number of pods that may be unavailable simultaneously.  This can be either an integer or a percentage.'),
    col('Allowed Disruptions', 'integer', 'Calculated number of pods that may be disrupted at this time.'),
    AGE,
  ],
  cells(o, now) {
    const spec = obj(o['spec']);
    const intOrString = (v: unknown): string => (v === undefined || v === null ? 'N/A' : String(v));
    return [meta(o).name, intOrString(spec['minAvailable']), intOrString(spec['maxUnavailable']), num(obj(o['status'])['disruptionsAllowed']), age(o, now)];
  },
};

function eventLastSeen(o: Obj, now: number): string {
  const series = obj(o['series']);
  const seriesTime = str(series['lastObservedTime']);
  if (seriesTime) return humanAge(seriesTime, now);
  const last = str(o['lastTimestamp']);
  if (last) return humanAge(last, now);
  const eventTime = str(o['eventTime']);
  return eventTime ? humanAge(eventTime, now) : '<unknown>';
}

const EVENT: Printer = {
  // kube's event table has no leading Name column: NAME is a wide column at the end.
  columns: [
    col('Last Seen', 'string', 'Time when last Event occurred'),
    col('Type', 'string', 'Type of this event (Normal, Warning), new types could be added in the future.'),
    col('Reason', 'string', 'This should be a short, machine understandable string that gives the reason for this event being generated.'),
    col('Object', 'string', 'The object that this event is about.'),
    col('Subobject', 'string', 'The subobject that this event is about.', 1),
    col('Source', 'string', 'The component reporting this event. Should be a short machine understandable string.', 1),
    col('Message', 'string', 'A human-readable description of the status of this operation.'),
    col('First Seen', 'string', 'The first time this event was reported.', 1),
    col('Count', 'string', 'The number of times this event has occurred.', 1),
    col('Name', 'string', 'Name must be unique within a namespace.', 1),
  ],
  cells(o, now) {
    const involved = obj(o['involvedObject']);
    const source = obj(o['source']);
    const component = str(source['component']) || str(o['reportingComponent']);
    const host = str(source['host']) || str(o['reportingInstance']);
    const first = str(o['firstTimestamp']) || str(o['eventTime']);
    const series = obj(o['series']);
    const count = typeof series['count'] === 'number' ? series['count'] : num(o['count']);
    return [eventLastSeen(o, now), str(o['type']), str(o['reason']), `${str(involved['kind']).toLowerCase()}/${str(involved['name'])}`,
      str(involved['fieldPath']), host ? `${component}, ${host}` : component, str(o['message']).trim(),
      first ? humanAge(first, now) : '<unknown>', count > 1 ? String(count) : '1', meta(o).name];
  },
};

/** events.k8s.io/v1 Events in the core Event's shape, for the one event printer (kube converts both to one internal type). */
function coreEventShape(o: Obj): Obj {
  return {
    metadata: o['metadata'], type: o['type'], reason: o['reason'], involvedObject: o['regarding'], message: o['note'],
    source: o['deprecatedSource'], firstTimestamp: o['deprecatedFirstTimestamp'], lastTimestamp: o['deprecatedLastTimestamp'],
    count: o['deprecatedCount'], eventTime: o['eventTime'], series: isPlainObject(o['series']) ? o['series'] : undefined,
    reportingComponent: o['reportingController'], reportingInstance: o['reportingInstance'],
  };
}

/** Printers by "group/resource". */
export const PRINTERS: Readonly<Record<string, Printer>> = {
  '/pods': POD,
  'apps/deployments': DEPLOYMENT,
  'apps/replicasets': REPLICASET,
  'apps/statefulsets': STATEFULSET,
  'apps/daemonsets': DAEMONSET,
  'batch/jobs': JOB,
  'batch/cronjobs': CRONJOB,
  '/services': SERVICE,
  '/events': EVENT,
  'events.k8s.io/events': { columns: EVENT.columns, cells: (o, now) => EVENT.cells(coreEventShape(o), now) },
  '/configmaps': CONFIGMAP,
  '/secrets': SECRET,
  '/serviceaccounts': SERVICEACCOUNT,
  'coordination.k8s.io/leases': LEASE,
  'policy/poddisruptionbudgets': PDB,
};
