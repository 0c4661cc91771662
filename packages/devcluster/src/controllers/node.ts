/**
 * One simulated node, `portal-dev-node`, in the spirit of kwok: a Node object
 * that is Ready, a scheduler that binds every unscheduled Pod to it, and a
 * kubelet that reports its Pods Running and Ready with an IP at once (there
 * is no container runtime). Pods that run to completion (restartPolicy Never
 * or OnFailure, as a Job's) succeed after `completeAfterMs`.
 */
import { randomBytes } from 'node:crypto';
import { clone, isPlainObject, meta, nowTimestamp, type Obj, type UserInfo } from '../apiserver/types.ts';
import { NODES, PODS, type Host } from './host.ts';
import { key, splitKey, WorkQueue } from './queue.ts';

export const NODE_NAME = 'portal-dev-node';
export const NODE_IP = '172.18.0.2';

export interface NodeOptions {
  /** How long a run-to-completion Pod runs before it Succeeds. @default 1000 */
  completeAfterMs: number;
  onError: (err: unknown) => void;
}

const KUBELET: UserInfo = { username: `system:node:${NODE_NAME}`, uid: 'portal-dev-node', groups: ['system:nodes', 'system:authenticated'] };

function nodeObject(): Obj {
  return {
    metadata: {
      name: NODE_NAME,
      labels: {
        'kubernetes.io/hostname': NODE_NAME, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64',
        'beta.kubernetes.io/os': 'linux', 'beta.kubernetes.io/arch': 'amd64', type: 'kwok',
      },
      annotations: { 'node.alpha.kubernetes.io/ttl': '0', 'kwok.x-k8s.io/node': 'fake' },
    },
    spec: { podCIDR: '10.244.0.0/16', podCIDRs: ['10.244.0.0/16'] },
  };
}

function nodeStatus(): Obj {
  const t = nowTimestamp();
  const cond = (type: string, status: string, reason: string, message: string): Obj =>
    ({ type, status, reason, message, lastHeartbeatTime: t, lastTransitionTime: t });
  const resources = { cpu: '8', memory: '32Gi', pods: '110', 'ephemeral-storage': '100Gi' };
  return {
    conditions: [
      cond('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
      cond('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
      cond('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
      cond('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status'),
    ],
    addresses: [{ type: 'InternalIP', address: NODE_IP }, { type: 'Hostname', address: NODE_NAME }],
    capacity: resources, allocatable: resources,
    daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
    nodeInfo: {
      architecture: 'amd64', operatingSystem: 'linux', osImage: 'portal dev (simulated, no container runtime)',
      kernelVersion: '', kubeletVersion: 'v1.35.0', kubeProxyVersion: '', containerRuntimeVersion: 'none://',
      machineID: '', systemUUID: '', bootID: '',
    },
  };
}

/** Pod IPs from 10.244.0.0/16, handed out in order and reused after the Pod is gone. */
class PodIps {
  private next = 2;
  private readonly free: number[] = [];
  private readonly byPod = new Map<string, number>();
  take(pod: string): string {
    let n = this.byPod.get(pod);
    if (n === undefined) {
      n = this.free.pop() ?? this.next++;
      this.byPod.set(pod, n);
    }
    return `10.244.${(n >> 8) & 0xff}.${n & 0xff}`;
  }
  release(pod: string): void {
    const n = this.byPod.get(pod);
    if (n === undefined) return;
    this.byPod.delete(pod);
    this.free.push(n);
  }
}

function containers(spec: Obj, field: string): Obj[] {
  const v = spec[field];
  return Array.isArray(v) ? v.filter(isPlainObject) : [];
}

function runsToCompletion(pod: Obj): boolean {
  const spec = (pod['spec'] ?? {}) as Obj;
  return spec['restartPolicy'] === 'Never' || spec['restartPolicy'] === 'OnFailure';
}

function podCondition(type: string, status: string, t: string, reason?: string): Obj {
  return { type, status, lastProbeTime: null, lastTransitionTime: t, ...(reason ? { reason } : {}) };
}

/** The status the kubelet reports for a started Pod (or a finished one, with `done`). */
export function runningStatus(pod: Obj, ip: string, done: boolean): Obj {
  const spec = (pod['spec'] ?? {}) as Obj;
  const old = (pod['status'] ?? {}) as Obj;
  const t = nowTimestamp();
  const startTime = typeof old['startTime'] === 'string' ? old['startTime'] : t;
  const cid = (): string => `portal-dev://${randomBytes(32).toString('hex')}`;
  const status = (c: Obj, ready: boolean, state: Obj): Obj => ({
    name: c['name'], image: c['image'], imageID: '', containerID: cid(), ready, started: !done && ready, restartCount: 0, state, lastState: {},
  });
  const finished = (): Obj => ({ terminated: { exitCode: 0, reason: 'Completed', startedAt: startTime, finishedAt: t, containerID: cid() } });
  const readyStatus = done ? 'False' : 'True';
  return {
    ...old,
    phase: done ? 'Succeeded' : 'Running',
    conditions: [
      podCondition('PodReadyToStartContainers', done ? 'False' : 'True', t),
      podCondition('Initialized', 'True', t),
      podCondition('Ready', readyStatus, t, done ? 'PodCompleted' : undefined),
      podCondition('ContainersReady', readyStatus, t, done ? 'PodCompleted' : undefined),
      podCondition('PodScheduled', 'True', t),
    ],
    hostIP: NODE_IP, hostIPs: [{ ip: NODE_IP }],
    ...(done ? {} : { podIP: ip, podIPs: [{ ip }] }),
    startTime,
    ...(containers(spec, 'initContainers').length ? { initContainerStatuses: containers(spec, 'initContainers').map((c) => status(c, false, finished())) } : {}),
    containerStatuses: containers(spec, 'containers').map((c) => status(c, !done, done ? finished() : { running: { startedAt: startTime } })),
  };
}

/** Runs the node until `signal` aborts. */
export async function runNode(host: Host, opts: NodeOptions, signal: AbortSignal): Promise<{ idle(): Promise<void> }> {
  if (!host.get(NODES, '', NODE_NAME)) {
    const created = await host.create(KUBELET, NODES, '', nodeObject(), { skipAdmission: true });
    await host.update(KUBELET, NODES, { ...created, status: nodeStatus() }, 'status');
  }
  const ips = new PodIps();
  const finishTimers = new Map<string, NodeJS.Timeout>();
  signal.addEventListener('abort', () => { for (const t of finishTimers.values()) clearTimeout(t); }, { once: true });

  const sync = async (k: string): Promise<void> => {
    const [ns, name] = splitKey(k);
    const pod = host.get(PODS, ns, name);
    if (!pod) {
      ips.release(k);
      return;
    }
    const m = meta(pod);
    const spec = (pod['spec'] ?? {}) as Obj;
    if (m.deletionTimestamp) return;
    if (spec['nodeName'] === undefined || spec['nodeName'] === '') {
      // The scheduler's Binding: only nodeName and the PodScheduled condition change.
      // Written without admission, as pods/binding is not what a pods webhook matches.
      const bound = clone(pod);
      (bound['spec'] as Obj)['nodeName'] = NODE_NAME;
      await host.update(SCHEDULER, PODS, bound, '', { skipAdmission: true });
      return; // the MODIFIED event brings the Pod back as bound
    }
    if (spec['nodeName'] !== NODE_NAME) return; // no kubelet for other nodes: it stays Pending, as on a real cluster
    const status = (pod['status'] ?? {}) as Obj;
    const phase = status['phase'];
    if (phase === 'Succeeded' || phase === 'Failed') {
      ips.release(k);
      return;
    }
    if (phase !== 'Running') {
      await host.update(KUBELET, PODS, { ...clone(pod), status: runningStatus(pod, ips.take(k), false) }, 'status');
      return;
    }
    if (runsToCompletion(pod) && !finishTimers.has(k)) {
      const uid = m.uid;
      finishTimers.set(k, setTimeout(() => {
        finishTimers.delete(k);
        const now = host.get(PODS, ns, name);
        if (!now || meta(now).uid !== uid) return;
        ips.release(k);
        host.update(KUBELET, PODS, { ...clone(now), status: runningStatus(now, '', true) }, 'status').catch(opts.onError);
      }, opts.completeAfterMs));
      finishTimers.get(k)!.unref();
    }
  };
  const queue = new WorkQueue(sync, signal, (_k, err) => opts.onError(err));
  const stop = host.watch(PODS, (ev) => {
    const m = meta(ev.object);
    queue.add(key(m.namespace ?? '', m.name ?? ''));
  });
  signal.addEventListener('abort', stop, { once: true });
  for (const p of host.list(PODS)) queue.add(key(meta(p).namespace ?? '', meta(p).name ?? ''));
  return { idle: () => queue.idle() };
}

const SCHEDULER: UserInfo = {
  username: 'system:kube-scheduler', uid: 'portal-dev-scheduler', groups: ['system:authenticated'],
};
