/**
 * kube-apiserver's table printers for the built-in kinds kubectl users look
 * at most (pkg/printers/internalversion/printers.go): the same columns in
 * the same order, with priority 1 for the ones only `-o wide` shows, and the
 * same computed cells (READY "1/3", PORT(S) "80/TCP", SELECTOR, "<none>").
 */
import type { Printer } from './printer-cells.ts';
import { CRONJOB, DAEMONSET, DEPLOYMENT, JOB, POD, REPLICASET, STATEFULSET } from './printers-workloads.ts';
import { CONFIGMAP, coreEventShape, EVENT, LEASE, PDB, SECRET, SERVICE, SERVICEACCOUNT } from './printers-services.ts';

export { formatLabelSelector, type ColumnDef, type Printer } from './printer-cells.ts';

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
