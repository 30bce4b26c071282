// A Node.js client of informerd: lists a resource, gets one object, and
// watches from the list's resourceVersion, reconnecting from the last
// resourceVersion it saw when the stream breaks — the pattern every client
// should follow. It loads the checked-in .proto at run time.
//
// Usage: node client.js ADDRESS RESOURCE NAMESPACE EVENTS [FIELDS]
//   Prints one JSON line per step; stops after EVENTS watch events.
//   FIELDS, comma-separated paths such as metadata.labels,status.podIP, is a
//   field mask: list, get and watch return only those fields of each object
//   (printed with each event), and the watch sends no change to other fields.
//   With RESUME_AFTER=n in the environment it drops the stream after n
//   events and resumes, to show (and test) that nothing is lost.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const [address, resource, namespace, wantArg, fieldsArg] = process.argv.slice(2);
if (!address || !resource || !wantArg) {
  console.error('usage: node client.js ADDRESS RESOURCE NAMESPACE EVENTS [FIELDS]');
  process.exit(2);
}
const want = Number(wantArg);
// The paths of FIELDS, split at the commas outside backquotes (a name in
// backquotes may hold dots: metadata.labels.`app.kubernetes.io/name`).
const paths = (fieldsArg || '').match(/(?:`[^`]*`|[^,])+/g)?.map((p) => p.trim()).filter(Boolean) ?? [];
// A google.protobuf.FieldMask; none means whole objects.
const fields = paths.length > 0 ? { paths } : undefined;
// With a mask, each event line carries the object as the mask shows it.
const shown = (object) => (fields ? { object: decode(object) } : {});
const resumeAfter = Number(process.env.RESUME_AFTER || 0);

const definition = protoLoader.loadSync(
  path.join(__dirname, '../../api/proto/informerd/v1/cache.proto'),
  { keepCase: false, longs: String, enums: String, defaults: true, oneofs: true },
);
const { CacheService } = grpc.loadPackageDefinition(definition).informerd.v1;
const caFile = process.env.INFORMERD_CA_FILE;
const tokenFile = process.env.INFORMERD_TOKEN_FILE;
const client = new CacheService(address,
  caFile ? grpc.credentials.createSsl(fs.readFileSync(caFile)) : grpc.credentials.createInsecure());

// Call metadata: the bearer token, read again for every call because the
// kubelet rotates projected ServiceAccount tokens by replacing the file.
function metadata() {
  const md = new grpc.Metadata();
  if (tokenFile) md.set('authorization', `Bearer ${fs.readFileSync(tokenFile, 'utf8').trim()}`);
  return md;
}

const print = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const decode = (object) => JSON.parse(Buffer.from(object.json).toString('utf8'));

function call(method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, metadata(), (err, response) => (err ? reject(err) : resolve(response)));
  });
}

async function main() {
  const list = await call('List', { resource, selector: { namespace }, fields });
  print({ step: 'list', resourceVersion: list.resourceVersion, names: list.objects.map((o) => o.name) });
  if (list.objects.length > 0) {
    const first = list.objects[0];
    const got = await call('Get', { resource, namespace: first.namespace, name: first.name, fields });
    print({ step: 'get', name: got.object.name, kind: decode(got.object).kind, ...shown(got.object) });
  }

  let lastRV = list.resourceVersion;
  let seen = 0;
  let resumed = false;
  while (seen < want) {
    await new Promise((resolve, reject) => {
      // With a mask, bookmarks also carry lastRV past the changes it hides:
      // a resume after a long quiet spell starts from a recent
      // resourceVersion, still inside informerd's history.
      const stream = client.Watch({ resource, selector: { namespace }, resourceVersion: lastRV, allowBookmarks: true, fields }, metadata());
      stream.on('data', (ev) => {
        lastRV = ev.resourceVersion;
        if (ev.type === 'EVENT_TYPE_BOOKMARK') return;
        seen++;
        print({ step: 'event', type: ev.type.replace('EVENT_TYPE_', ''), name: ev.object.name, resourceVersion: ev.resourceVersion, kind: decode(ev.object).kind, ...shown(ev.object) });
        if (seen >= want || (resumeAfter && seen === resumeAfter && !resumed)) {
          resumed = resumed || seen === resumeAfter;
          if (seen < want) print({ step: 'resume', from: lastRV });
          stream.cancel();
        }
      });
      stream.on('error', (err) => {
        if (err.code === grpc.status.CANCELLED) return resolve();
        if (err.code === grpc.status.OUT_OF_RANGE) {
          // Too old to resume: a real client lists again here.
          return reject(new Error(`resourceVersion ${lastRV} is too old: list again (${err.details})`));
        }
        if ([grpc.status.INVALID_ARGUMENT, grpc.status.NOT_FOUND, grpc.status.UNAUTHENTICATED,
          grpc.status.PERMISSION_DENIED].includes(err.code)) {
          return reject(err); // retrying does not help
        }
        // UNAVAILABLE (shutdown, failover), RESOURCE_EXHAUSTED (slow consumer,
        // limits) and the like: back off, resume from lastRV.
        print({ step: 'reconnect', code: err.code, from: lastRV });
        setTimeout(resolve, 200);
      });
      stream.on('end', resolve);
    });
  }
  client.close();
}

main().catch((err) => {
  console.error(`informerd client: ${err.message}`);
  process.exit(1);
});
