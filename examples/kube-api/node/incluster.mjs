// An unmodified @kubernetes/client-node program that runs in a pod:
// KubeConfig.loadFromCluster(), a list and a write. Injected beside
// informerd (docs/deploy.md), the pod's environment and service account
// volume point it at informerd: the list is answered from informerd's
// cache and the write is forwarded with the pod's token.
//
//   node incluster.mjs NAME
//
// Lists the ConfigMaps of its namespace, creates the ConfigMap NAME, and
// prints one JSON object.
import { readFileSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';

const [name] = process.argv.slice(2);
const kc = new k8s.KubeConfig();
kc.loadFromCluster();
const namespace = readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim();
const core = kc.makeApiClient(k8s.CoreV1Api);
const list = await core.listNamespacedConfigMap({ namespace });
await core.createNamespacedConfigMap({ namespace, body: { metadata: { name } } });
process.stdout.write(JSON.stringify({
  host: kc.getCurrentCluster().server,
  listed: list.items.map((cm) => cm.metadata.name),
  created: name,
}) + '\n');
