// An unmodified @kubernetes/client-node informer on the ConfigMaps of one
// namespace. Point its kubeconfig at informerd's Kubernetes API
// (--kube-api-address) and its list and watch are served from informerd's
// cache; point it at the API server and nothing changes in the code.
//
//   node informer.mjs KUBECONFIG NAMESPACE EVENTS
//
// Prints one JSON object per line: each add, update and delete the informer
// reports (the first list's objects come as adds), "synced" once it has
// listed and is watching, and exits after EVENTS changes past that.
import * as k8s from '@kubernetes/client-node';

const [kubeconfig, namespace, events] = process.argv.slice(2);
const kc = new k8s.KubeConfig();
kc.loadFromFile(kubeconfig);
const core = kc.makeApiClient(k8s.CoreV1Api);
const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${namespace}/configmaps`,
  () => core.listNamespacedConfigMap({ namespace }));

const print = (line) => process.stdout.write(JSON.stringify(line) + '\n');
let synced = false;
let changes = 0;
for (const type of [k8s.ADD, k8s.UPDATE, k8s.DELETE]) {
  informer.on(type, (cm) => {
    print({ step: 'event', type, name: cm.metadata.name, resourceVersion: cm.metadata.resourceVersion });
    if (synced && ++changes === Number(events)) process.exit(0);
  });
}
informer.on(k8s.ERROR, (err) => {
  console.error('informer error:', err);
  process.exit(1);
});

await informer.start();
synced = true;
print({ step: 'synced', names: informer.list(namespace).map((cm) => cm.metadata.name).sort() });
