// Validates rendered Kubernetes manifests (multi-document YAML, as
// `kubectl kustomize` prints them):
//   1. every object against the Kubernetes OpenAPI schema of its apiVersion and
//      kind (the kubernetes-models package: types, required fields, formats,
//      quantities); an object of a kind it does not know is an error too;
//   2. the contract the Tandem processes need (docs/operations.md): probes on the
//      ports and paths the processes serve (/health/ready, /health/live), a
//      grace period longer than the node's drain_timeout_ms and a preStop hook,
//      --config and the token file mounted (readable by the pod's user),
//      ConfigMap keys and Services that resolve, Prometheus annotations on a
//      served port, and one GPU per prefill and decode pod exactly when
//      --expect-gpu is given.
// Usage: node k8s_validate.mjs <node_modules> <rendered.yaml> [--expect-gpu]
// Prints every problem and exits 1 if there is any.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [modules, file, ...flags] = process.argv.slice(2);
const expectGpu = flags.includes("--expect-gpu");
const require = createRequire(path.join(path.resolve(modules), "noop.js"));
const YAML = require("yaml");
// Objects the manifests use but an operator creates (the base's kustomization.yaml says how).
const external = { Secret: ["tandem-cluster-token"], PersistentVolumeClaim: ["tandem-models"] };

const problems = [];
const fail = (where, what) => problems.push(`${where}: ${what}`);
const docs = YAML.parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS()).filter((d) => d);
if (docs.length === 0) fail(file, "no objects");

// 1. Schemas.
for (const obj of docs) {
  const where = `${obj.kind}/${obj.metadata?.name}`;
  let models;
  try {
    models = require(`kubernetes-models/${obj.apiVersion}`);
  } catch {
    fail(where, `unknown apiVersion ${obj.apiVersion}`);
    continue;
  }
  const Model = models[obj.kind];
  if (!Model) {
    fail(where, `unknown kind ${obj.kind} in ${obj.apiVersion}`);
    continue;
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    fail(where, `schema: ${e.message}`);
  }
}

// 2. The processes' contract.
const byKind = (kind) => docs.filter((d) => d.kind === kind);
const configMaps = new Map(byKind("ConfigMap").map((c) => [c.metadata.name, c]));
const portOf = (address) => Number(String(address).split(":").pop());

for (const dep of byKind("Deployment")) {
  const where = `Deployment/${dep.metadata.name}`;
  const pod = dep.spec?.template?.spec ?? {};
  const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
  for (const v of volumes.values()) {
    if (v.configMap && !configMaps.has(v.configMap.name)) fail(where, `ConfigMap ${v.configMap.name} is not defined`);
    if (v.secret && !external.Secret.includes(v.secret.secretName)) fail(where, `Secret ${v.secret.secretName} is unknown`);
    const claim = v.persistentVolumeClaim?.claimName;
    if (claim && !external.PersistentVolumeClaim.includes(claim)) fail(where, `claim ${claim} is unknown`);
  }
  for (const c of pod.containers ?? []) {
    const cw = `${where} container ${c.name}`;
    const program = path.basename(c.command?.[0] ?? "");
    const role = { "tandem-router": "router", "tandem-prefill": "prefill", "tandem-decode": "decode" }[program];
    if (!role) {
      fail(cw, `runs ${c.command}, not a Tandem server`);
      continue;
    }
    const args = new Map((c.args ?? []).map((a) => a.split(/=(.*)/s).slice(0, 2)));
    const mounted = (p) =>
      (c.volumeMounts ?? []).find((m) => p === m.mountPath || p.startsWith(m.mountPath.replace(/\/?$/, "/")));
    // The config: mounted from a ConfigMap key that exists; its ports are the ones probed.
    const configPath = args.get("--config") ?? "";
    const configMount = mounted(configPath);
    const configMap = configMaps.get(volumes.get(configMount?.name)?.configMap?.name);
    const configText = configMap?.data?.[configMount?.subPath];
    if (!configText) {
      fail(cw, `--config ${configPath} is not a mounted ConfigMap key`);
      continue;
    }
    const config = YAML.parse(configText) ?? {};
    const tokenFile = args.get("--cluster-token-file") ?? config.cluster_token_file;
    const secret = volumes.get(mounted(tokenFile ?? "")?.name)?.secret;
    if (!tokenFile || !secret) {
      fail(cw, "the cluster token file is not a mounted Secret");
    } else {
      // Secret files belong to root (group fsGroup when set): a non-root process
      // reads them through the group or the others bits of defaultMode.
      const mode = secret.defaultMode ?? 0o644;
      const user = c.securityContext?.runAsUser ?? pod.securityContext?.runAsUser ?? 0;
      const readable = user === 0 || mode & 0o004 || (pod.securityContext?.fsGroup !== undefined && mode & 0o040);
      if (!readable) fail(cw, `the token file (mode 0${mode.toString(8)}) is unreadable for UID ${user}`);
    }
    const httpPort = role === "router" ? config.listen_port ?? 8000 : portOf(config.http_address ?? "");
    const ports = new Map((c.ports ?? []).map((p) => [p.name, p.containerPort]));
    const resolve = (port) => (typeof port === "number" ? port : ports.get(port));
    for (const [probe, want] of [["readinessProbe", "/health/ready"], ["livenessProbe", "/health/live"]]) {
      const get = c[probe]?.httpGet;
      if (get?.path !== want) fail(cw, `${probe} must GET ${want} (has ${get?.path})`);
      else if (resolve(get.port) !== httpPort) fail(cw, `${probe} port ${get.port} is not the HTTP port ${httpPort}`);
    }
    const scrapePort = Number(dep.spec.template.metadata?.annotations?.["prometheus.io/port"]);
    if (scrapePort !== httpPort) fail(cw, `prometheus.io/port ${scrapePort} is not the HTTP port ${httpPort}`);
    // Every role drains on SIGTERM (the router its running requests, a node its work).
    const drainMs = config.drain_timeout_ms ?? 30000;
    const graceS = pod.terminationGracePeriodSeconds ?? 30;
    if (graceS * 1000 <= drainMs) {
      fail(cw, `terminationGracePeriodSeconds ${graceS} s is not longer than drain_timeout_ms ${drainMs}`);
    }
    if (!c.lifecycle?.preStop) fail(cw, "no preStop hook waiting for the drain");
    if (role !== "router") {
      if (!args.has("--advertise-address") && !config.advertise_address) fail(cw, "no advertise address");
      const gpus = Number(c.resources?.limits?.["nvidia.com/gpu"] ?? 0);
      const backend = config.backend ?? "cpu";
      if (expectGpu && (gpus < 1 || backend !== "cuda")) fail(cw, `wants a GPU: nvidia.com/gpu ${gpus}, backend ${backend}`);
      if (!expectGpu && (gpus > 0 || backend !== "cpu")) fail(cw, `CPU only: nvidia.com/gpu ${gpus}, backend ${backend}`);
    }
  }
}

// Services select pods of a Deployment and name ports those pods declare.
for (const svc of byKind("Service")) {
  const where = `Service/${svc.metadata.name}`;
  const selector = Object.entries(svc.spec?.selector ?? {});
  const pods = byKind("Deployment")
    .map((d) => d.spec.template)
    .filter((t) => selector.length && selector.every(([k, v]) => t.metadata?.labels?.[k] === v));
  if (pods.length === 0) {
    fail(where, "selects no Deployment's pods");
    continue;
  }
  for (const port of svc.spec.ports ?? []) {
    const target = port.targetPort ?? port.port;
    const served = pods.some((t) =>
      t.spec.containers.some((c) => (c.ports ?? []).some((p) => p.name === target || p.containerPort === target)),
    );
    if (!served) fail(where, `targetPort ${target} is no container port`);
  }
}

if (problems.length) {
  console.error(`${file}: ${problems.length} problem(s)\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`${file}: ${docs.length} objects valid (${docs.map((d) => d.kind).join(", ")})`);
