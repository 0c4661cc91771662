/** Table printers of pods and workloads (printers.ts). */
import { humanAge, humanDurationMs } from './age.ts';
import { AGE, CONTAINERS, IMAGES, NAME, NONE, SELECTOR, age, col, containerCells, formatLabelSelector, formatMap, list, num, obj, podSpecOf, str, type Printer } from './printer-cells.ts';
import { isPlainObject, meta, type Obj } from './types.ts';

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

export const POD: Printer = {
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

export const DEPLOYMENT: Printer = {
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

export const REPLICASET: Printer = {
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

export const STATEFULSET: Printer = {
  columns: [NAME, col('Ready', 'string', 'Number of the pod with ready state'), AGE, CONTAINERS, IMAGES],
  cells(o, now) {
    const spec = obj(o['spec']);
    const status = obj(o['status']);
    const desired = typeof spec['replicas'] === 'number' ? spec['replicas'] : 1;
    return [meta(o).name, `${num(status['readyReplicas'])}/${desired}`, age(o, now), ...containerCells(podSpecOf(spec['template']))];
  },
};

export const DAEMONSET: Printer = {
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


export const JOB: Printer = {
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

export const CRONJOB: Printer = {
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
