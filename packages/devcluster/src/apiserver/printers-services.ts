/** Table printers of services, config, leases, PDBs and events (printers.ts). */
import { humanAge } from './age.ts';
import { AGE, NAME, NONE, age, col, formatMap, list, num, obj, str, type Printer } from './printer-cells.ts';
import { isPlainObject, meta, type Obj } from './types.ts';

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

export const SERVICE: Printer = {
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

export const CONFIGMAP: Printer = {
  columns: [NAME, col('Data', 'integer', 'Data contains the configuration data.'), AGE],
  cells: (o, now) => [meta(o).name, Object.keys(obj(o['data'])).length + Object.keys(obj(o['binaryData'])).length, age(o, now)],
};

export const SECRET: Printer = {
  columns: [NAME, col('Type', 'string', 'The type of the secret'), col('Data', 'integer', 'Data contains the secret data.'), AGE],
  cells: (o, now) => [meta(o).name, str(o['type']), Object.keys(obj(o['data'])).length, age(o, now)],
};

export const SERVICEACCOUNT: Printer = {
  columns: [NAME, col('Secrets', 'string', 'Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.'), AGE],
  cells: (o, now) => [meta(o).name, list(o['secrets']).length, age(o, now)],
};

export const LEASE: Printer = {
  columns: [NAME, col('Holder', 'string', 'holderIdentity contains the identity of the holder of a current lease.'), AGE],
  cells: (o, now) => [meta(o).name, str(obj(o['spec'])['holderIdentity']), age(o, now)],
};

export const PDB: Printer = {
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

export const EVENT: Printer = {
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
export function coreEventShape(o: Obj): Obj {
  return {
    metadata: o['metadata'], type: o['type'], reason: o['reason'], involvedObject: o['regarding'], message: o['note'],
    source: o['deprecatedSource'], firstTimestamp: o['deprecatedFirstTimestamp'], lastTimestamp: o['deprecatedLastTimestamp'],
    count: o['deprecatedCount'], eventTime: o['eventTime'], series: isPlainObject(o['series']) ? o['series'] : undefined,
    reportingComponent: o['reportingController'], reportingInstance: o['reportingInstance'],
  };
}
