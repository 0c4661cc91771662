/** The realistic ~3 KB Pod the engine benchmarks evaluate (a Deployment's replica with an init container and a sidecar). */
import type { EvaluationInput, KubeObject } from '../src/policy/index.ts';

export function realisticPod(): KubeObject {
  const container = (name: string, image: string) => ({
    name,
    image,
    imagePullPolicy: 'IfNotPresent',
    args: ['--port=8080', '--log-level=info', '--metrics-addr=:9090'],
    ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }, { name: 'metrics', containerPort: 9090, protocol: 'TCP' }],
    env: [
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    ],
    resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '500m', memory: '256Mi' } },
    readinessProbe: { httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 5 },
    securityContext: {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
    volumeMounts: [{ name: 'config', mountPath: '/etc/app' }, { name: 'tmp', mountPath: '/tmp' }],
  });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'checkout-7d9f8b6c5d-x2k4p',
      namespace: 'shop',
      uid: '6f1c7a52-2a0b-4b8e-9d7e-0c1f2a3b4c5d',
      labels: { 'app.kubernetes.io/name': 'checkout', 'app.kubernetes.io/part-of': 'shop', 'pod-template-hash': '7d9f8b6c5d', team: 'payments' },
      annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9090', 'kubectl.kubernetes.io/default-container': 'app' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'checkout-7d9f8b6c5d', uid: '0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0', controller: true, blockOwnerDeletion: true }],
    },
    spec: {
      serviceAccountName: 'checkout',
      securityContext: { runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001, seccompProfile: { type: 'RuntimeDefault' } },
      initContainers: [{ ...container('migrate', 'registry.example.com/shop/checkout-migrate:1.42.0'), args: ['migrate', '--wait'] }],
      containers: [container('app', 'registry.example.com/shop/checkout:1.42.0'), container('proxy', 'registry.example.com/platform/envoy:1.31.2')],
      volumes: [{ name: 'config', configMap: { name: 'checkout-config' } }, { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } }],
      terminationGracePeriodSeconds: 30,
    },
  };
}

/** The evaluation input of a Pod CREATE in namespace `shop`, as the admission path builds it (the engine benchmarks' request). */
export function podInput(object: KubeObject): EvaluationInput {
  return {
    operation: 'CREATE',
    kind: { group: '', version: 'v1', kind: 'Pod' },
    subResource: '',
    namespace: 'shop',
    name: 'checkout-7d9f8b6c5d-x2k4p',
    object,
    oldObject: null,
    namespaceLabels: { 'kubernetes.io/metadata.name': 'shop' },
  };
}
