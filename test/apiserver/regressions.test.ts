/**
 * Regressions found while running the README's first five minutes against
 * `portal dev`: non-ASCII warnings were double-encoded (kubectl dropped
 * them) and printer columns with a JSONPath filter printed nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { caller, withServer } from './helpers.ts';

test('a non-ASCII warning reaches the client as its UTF-8 bytes, like kube-apiserver', () =>
  withServer({ admission: { admit: () => Promise.resolve({ allowed: true, warnings: ['restrict-seccomp-strict: set a profile…'] }) } }, async (s) => {
    const call = caller(s, s.addUser('bob'));
    const res = await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'c' } });
    assert.equal(res.status, 201);
    // fetch exposes header bytes as latin1 code points; decode them as UTF-8.
    const raw = res.headers.get('warning') ?? '';
    assert.equal(Buffer.from(raw, 'latin1').toString('utf8'), '299 - "restrict-seccomp-strict: set a profile…"');
  }));

test('printer columns with a JSONPath filter select the matching condition', () =>
  withServer({}, async (s) => {
    const call = caller(s, s.adminToken);
    const crd = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'widgets.example.com' },
      spec: {
        group: 'example.com',
        scope: 'Cluster',
        names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
        versions: [{
          name: 'v1', served: true, storage: true, subresources: { status: {} },
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
          additionalPrinterColumns: [{ name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' }],
        }],
      },
    };
    assert.equal((await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd)).status, 201);
    assert.equal((await call('POST', '/apis/example.com/v1/widgets', { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } })).status, 201);
    const status = { status: { conditions: [{ type: 'Compiled', status: 'False' }, { type: 'Ready', status: 'True' }] } };
    assert.equal((await call('PATCH', '/apis/example.com/v1/widgets/w/status', status, 'application/merge-patch+json')).status, 200);
    const table = await call('GET', '/apis/example.com/v1/widgets', undefined, 'application/json', { Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' });
    const rows = table.body['rows'] as { cells: unknown[] }[];
    assert.deepEqual(rows[0]?.cells.slice(0, 2), ['w', 'True']);
  }));
