// Package k8s_test checks the Kubernetes recipe in this directory without
// a cluster: every manifest decodes strictly into the upstream API types
// (k8s.io/api; an unknown or misspelt field fails), the fields that make
// the ranks find each other agree, and the environment a pod gets is what
// ringtail.ConfigFromLookup turns into a valid rank of the job — down to
// running the ranks as local processes with that environment.
package k8s_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/ringtail-ml/ringtail"
)

// rankVar set in its environment makes the test binary one rank of a
// job (rank), not the tests.
const rankVar = "K8S_TEST_RANK"

func TestMain(m *testing.M) {
	if os.Getenv(rankVar) != "" {
		os.Exit(rank())
	}
	os.Exit(m.Run())
}

// rank joins the job its environment describes, as ringtail-train does,
// and all-reduces rank+1.
func rank() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := ringtail.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	comm, err := ringtail.New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer comm.Close()
	buf := []float32{float32(comm.Rank() + 1)}
	if err := comm.AllReduce(ctx, ringtail.Float32s(buf), ringtail.Sum); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("rank %d of %d: sum=%g\n", comm.Rank(), comm.Size(), buf[0])
	return 0
}

// recipe is the decoded ringtail-train.yaml.
type recipe struct {
	svc corev1.Service
	job batchv1.Job
}

// loadRecipe decodes every document of file strictly into its kind's API
// type.
func loadRecipe(t *testing.T, file string) recipe {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var r recipe
	kinds := map[string]int{}
	for i, doc := range splitDocuments(data) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s document %d: %v", file, i, err)
		}
		var target any
		switch gvk := meta.APIVersion + " " + meta.Kind; gvk {
		case "v1 Service":
			target = &r.svc
		case "batch/v1 Job":
			target = &r.job
		default:
			t.Fatalf("%s document %d: unexpected %q", file, i, gvk)
		}
		if err := decodeStrict(doc, target); err != nil {
			t.Fatalf("%s document %d (%s): %v", file, i, meta.Kind, err)
		}
		kinds[meta.Kind]++
	}
	if kinds["Service"] != 1 || kinds["Job"] != 1 {
		t.Fatalf("%s holds %v; want one Service and one Job", file, kinds)
	}
	return r
}

// decodeStrict decodes one YAML document into target as the API server
// does with strict field validation: field names match case-sensitively,
// and an unknown or duplicate field is an error.
func decodeStrict(doc []byte, target any) error {
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(data, target)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// splitDocuments splits a YAML stream at its "---" lines, dropping
// documents that are only comments.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		for _, line := range bytes.Split(doc, []byte("\n")) {
			if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' {
				docs = append(docs, doc)
				break
			}
		}
	}
	return docs
}

func TestStrictDecodingRefusesTypos(t *testing.T) {
	for doc, want := range map[string]string{
		"spec:\n  completionmode: Indexed\n":                   `unknown field "spec.completionmode"`,
		"spec:\n  completionMode: Indexed\n  completions: x\n": "cannot unmarshal string",
		"spec:\n  parallelism: 4\n  parallelism: 2\n":          `"parallelism" already set`,
		"spec:\n  template:\n    spec:\n      subDomain: x\n":  `unknown field "spec.template.spec.subDomain"`,
	} {
		var job batchv1.Job
		if err := decodeStrict([]byte("apiVersion: batch/v1\nkind: Job\n"+doc), &job); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q decoded: %v; want an error mentioning %s", doc, err, want)
		}
	}
}

func TestRecipeFitsTogether(t *testing.T) {
	r := loadRecipe(t, "ringtail-train.yaml")
	svc, job := r.svc, r.job
	spec := job.Spec
	pod := spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers; the recipe runs one rank per pod", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range ctr.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("env %s set twice", e.Name)
		}
		env[e.Name] = e
	}
	value := func(name string) string { return env[name].Value }

	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("the Service must be headless (clusterIP None) and publish pods before they are ready")
	}
	for k, v := range svc.Spec.Selector {
		if spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the pods do not carry", k, v)
		}
	}
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("completionMode must be Indexed: JOB_COMPLETION_INDEX is the rank")
	}
	world, err := strconv.Atoi(value(ringtail.EnvWorldSize))
	if err != nil || spec.Completions == nil || spec.Parallelism == nil || *spec.Completions != int32(world) || *spec.Parallelism != int32(world) {
		t.Errorf("WORLD_SIZE %q, completions %s and parallelism %s must be one number", value(ringtail.EnvWorldSize), deref(spec.Completions), deref(spec.Parallelism))
	}
	if spec.BackoffLimit == nil || *spec.BackoffLimit != 0 || pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("a failed rank must fail the Job (backoffLimit 0, restartPolicy Never): a restarted rank cannot rejoin a running collective")
	}
	if pod.Subdomain != svc.Name {
		t.Errorf("subdomain %q must be the headless Service's name %q", pod.Subdomain, svc.Name)
	}
	if want := job.Name + "-0." + svc.Name; value(ringtail.EnvMasterAddr) != want {
		t.Errorf("MASTER_ADDR %q, want index 0's pod %q", value(ringtail.EnvMasterAddr), want)
	}
	if n := len(job.Name) + 1 + len(strconv.Itoa(world-1)); n > 63 {
		t.Errorf("pod hostnames %s-N are %d characters; at most 63", job.Name, n)
	}
	port, _ := strconv.Atoi(value(ringtail.EnvMasterPort))
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != int32(port) || svc.Spec.Ports[0].TargetPort.IntValue() != port ||
		!slices.ContainsFunc(ctr.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == int32(port) }) {
		t.Errorf("MASTER_PORT %d must be the Service's port, its target and a container port", port)
	}
	if _, set := env[ringtail.EnvRank]; set {
		t.Errorf("RANK is set: every pod would get the same rank; JOB_COMPLETION_INDEX gives it")
	}
	if _, set := env[ringtail.EnvSecret]; set {
		t.Errorf("the secret itself is in the manifest; mount it from a Secret and set RINGTAIL_SECRET_FILE")
	}
	if e := env[ringtail.EnvListenIP]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("RINGTAIL_LISTEN_IP must be the pod's IP (fieldRef status.podIP)")
	}

	// The secret file lies in a mounted Secret volume, under its key.
	secretFile := value(ringtail.EnvSecretFile)
	found := false
	for _, m := range ctr.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, secretFile)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || pod.Volumes[i].Secret == nil {
			t.Fatalf("RINGTAIL_SECRET_FILE %s is in volume %s, which is not a Secret", secretFile, m.Name)
		}
		sv := pod.Volumes[i].Secret
		found = sv.SecretName != "" && slices.ContainsFunc(sv.Items, func(k corev1.KeyToPath) bool { return k.Path == rel })
		if sv.DefaultMode == nil || *sv.DefaultMode&0o077 != 0 {
			t.Errorf("the secret's file mode %v lets others read it", sv.DefaultMode)
		}
	}
	if !found {
		t.Errorf("RINGTAIL_SECRET_FILE %q is not a key of a mounted Secret volume", secretFile)
	}

	// Every variable the manifest sets is one the runtime reads.
	asked := map[string]bool{}
	ringtail.ConfigFromLookup(func(name string) (string, bool) { asked[name] = true; return "", false })
	for name := range env {
		if !asked[name] {
			t.Errorf("the manifest sets %s, which ringtail.ConfigFromLookup never reads", name)
		}
	}
	if !asked[ringtail.EnvJobCompletionIndex] {
		t.Errorf("ringtail.ConfigFromLookup does not read %s", ringtail.EnvJobCompletionIndex)
	}
}

// deref prints an optional count.
func deref(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}

// podEnv is the environment the kubelet gives pod index: the manifest's
// values, its field references resolved, the Job controller's
// JOB_COMPLETION_INDEX; the secret file and rendezvous may be redirected
// for a local run.
func podEnv(t *testing.T, ctr corev1.Container, index int, podIP, uid, secretFile string) map[string]string {
	t.Helper()
	env := map[string]string{ringtail.EnvJobCompletionIndex: strconv.Itoa(index)}
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = podIP
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.labels['batch.kubernetes.io/controller-uid']":
			env[e.Name] = uid
		default:
			t.Fatalf("env %s: a source this test does not resolve: %+v", e.Name, e.ValueFrom)
		}
	}
	env[ringtail.EnvSecretFile] = secretFile
	return env
}

func TestEveryPodIsAValidRank(t *testing.T) {
	r := loadRecipe(t, "ringtail-train.yaml")
	ctr := r.job.Spec.Template.Spec.Containers[0]
	world := int(*r.job.Spec.Completions)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("from-a-kubernetes-secret\n"), 0o400)
	for i := range world {
		env := podEnv(t, ctr, i, fmt.Sprintf("10.244.1.%d", 10+i), "0b5a-uid", secret)
		c, err := ringtail.ConfigFromLookup(func(name string) (string, bool) { v, ok := env[name]; return v, ok })
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if c.Rank != i || c.WorldSize != world || c.LocalRank != 0 || c.LocalWorldSize != 1 || c.MasterAddr != "ringtail-train-0.ringtail-train" ||
			c.MasterPort != 29500 || c.ListenIP != env[ringtail.EnvListenIP] || c.JobID != "0b5a-uid" || string(c.Secret) != "from-a-kubernetes-secret" ||
			c.ExternalCoordinator {
			t.Errorf("pod %d: rank %d/%d local %d/%d rendezvous %s:%d listen %s job %q external %v secret read %v",
				i, c.Rank, c.WorldSize, c.LocalRank, c.LocalWorldSize, c.MasterAddr, c.MasterPort, c.ListenIP, c.JobID, c.ExternalCoordinator,
				string(c.Secret) == "from-a-kubernetes-secret")
		}
	}
}

// TestPodsRendezvousWithTheManifestsEnvironment runs the ranks as local
// processes with exactly the environment their pods would get — no RANK,
// rank 0 hosting the rendezvous — except that index 0's DNS name and the
// pods' IPs become this host's loopback address and the port a free one.
func TestPodsRendezvousWithTheManifestsEnvironment(t *testing.T) {
	r := loadRecipe(t, "ringtail-train.yaml")
	ctr := r.job.Spec.Template.Spec.Containers[0]
	world := int(*r.job.Spec.Completions)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("from-a-kubernetes-secret\n"), 0o400)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type result struct {
		out []byte
		err error
	}
	results := make(chan result, world)
	for i := range world {
		env := podEnv(t, ctr, i, "127.0.0.1", "local-uid", secret)
		env[ringtail.EnvMasterAddr], env[ringtail.EnvMasterPort] = "127.0.0.1", port
		cmd := exec.CommandContext(ctx, os.Args[0])
		cmd.Env = []string{rankVar + "=1", "PATH=" + os.Getenv("PATH"), "GORACE=atexit_sleep_ms=0"}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.WaitDelay = 10 * time.Second
		go func() {
			out, err := cmd.CombinedOutput()
			results <- result{out, err}
		}()
	}
	var outs []string
	for range world {
		res := <-results
		outs = append(outs, string(res.out))
		if res.err != nil {
			t.Errorf("a rank failed: %v\n%s", res.err, res.out)
		}
	}
	slices.Sort(outs)
	sum := world * (world + 1) / 2
	for i, out := range outs {
		if want := fmt.Sprintf("rank %d of %d: sum=%d\n", i, world, sum); out != want {
			t.Errorf("rank output %q, want %q", out, want)
		}
	}
}
