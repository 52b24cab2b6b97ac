package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/loadgen"
)

func TestBenchPrintsATableAndStopsAtItsRequestBound(t *testing.T) {
	rs := testServe(t, serveOptions{})
	// Every operation weighs the same, so that 150 requests reach each.
	var even []string
	for _, w := range loadgen.DefaultMix {
		even = append(even, w.Op+"=1")
	}
	out := memstoreCLI(t, 0, "bench", "--base-url", rs.baseURL, "--api-key", rs.adminKey, "--output", "table",
		"--duration", "1m", "--requests", "150", "--concurrency", "4", "--content-size", "100", "--mix", strings.Join(even, ","))
	lines := strings.Split(out, "\n")
	if !regexp.MustCompile(`^OPERATION +COUNT +PER_SEC +P50_MS +P95_MS +P99_MS +MAX_MS +ERRORS$`).MatchString(lines[0]) {
		t.Fatalf("header %q\n%s", lines[0], out)
	}
	for _, w := range loadgen.DefaultMix {
		// The name, a count above 0, then six figures and no error.
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(w.Op) + ` +[1-9][0-9]* +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +0$`)
		if !re.MatchString(out) {
			t.Errorf("no line for %s with requests and no error:\n%s", w.Op, out)
		}
	}
	if !regexp.MustCompile(`(?m)^event\.fanout +[1-9]`).MatchString(out) {
		t.Errorf("no fan-out line:\n%s", out)
	}
	if !strings.Contains(out, "\n150 requests in ") || !strings.Contains(out, "stopped by requests; 0 errors") {
		t.Errorf("summary does not say the run stopped at its 150 requests:\n%s", out)
	}
}

func TestBenchJSONParsesAndARunStopsAtItsDuration(t *testing.T) {
	rs := testServe(t, serveOptions{})
	start := time.Now()
	out := memstoreCLI(t, 0, "bench", "--base-url", rs.baseURL, "--api-key", rs.adminKey, "--output", "json",
		"--duration", "2s", "--requests", "1000000", "--rate", "100", "--followers", "1")
	took := time.Since(start)
	var rep loadgen.Report
	decodeOut(t, out, &rep)
	if rep.StoppedBy != "duration" || rep.ElapsedSeconds < 1.9 || rep.ElapsedSeconds > 3 {
		t.Errorf("stopped by %q after %vs, want the 2 s duration", rep.StoppedBy, rep.ElapsedSeconds)
	}
	if took > 30*time.Second {
		t.Errorf("a 2 s bench took %v with its setup and cleanup", took)
	}
	// 100/s for 2 s: the rate holds it under about 200, far from the bound.
	if rep.Requests == 0 || rep.Requests > 220 || rep.TargetRate != 100 {
		t.Errorf("%d requests at a target of %v/s over 2 s", rep.Requests, rep.TargetRate)
	}
	var sum int64
	for _, op := range rep.Operations {
		if op.Name != loadgen.OpEventFanout {
			sum += op.Count + op.Errors
		}
	}
	if len(rep.Operations) != len(loadgen.DefaultMix)+1 || sum != rep.Requests {
		t.Errorf("%d operations adding up to %d requests, report says %d: %+v", len(rep.Operations), sum, rep.Requests, rep.Operations)
	}
	for _, op := range rep.Operations {
		if op.Name == loadgen.OpMemoryGet && (op.Count == 0 || op.P99MS <= 0) {
			t.Errorf("memory.get: %+v", op)
		}
	}
}

func TestBenchRefusesBadFlagsBeforeAnyRequest(t *testing.T) {
	rs := testServe(t, serveOptions{})
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "0s"}, "--duration 0s: give a positive duration"},
		{[]string{"--duration", "ten"}, `invalid argument "ten" for "--duration"`},
		{[]string{"--requests", "0"}, "--requests 0: give a positive number"},
		{[]string{"--rate", "-3"}, "--rate -3: give 0 (flat out)"},
		{[]string{"--concurrency", "0"}, "--concurrency 0: give 1 or more"},
		{[]string{"--content-size", "200000"}, "--content-size 200000: give between 1 and 102400 bytes"},
		{[]string{"--mix", "memory.get=3,memory.fly=1"}, `--mix: "memory.fly" is not an operation; use memory.get, `},
		{[]string{"--mix", "memory.get=0"}, "--mix: every weight is 0"},
		{[]string{"--seed", "10x1000"}, `--seed: "10x1000": write the shape as STORESxMEMORIESxVERSIONS`},
		{[]string{"--reuse-seed", "-1"}, "--reuse-seed -1: give how many seeded stores"},
		{[]string{"--reuse-seed", "5", "--seed", "1x1x1"}, "--seed and --reuse-seed: give one"},
		{[]string{"--output", "xml"}, `--output "xml": use json, table or yaml`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(append([]string{"bench"}, conn...), tc.args...), testStreams(&out, &errb))
		if code == 0 || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
			t.Errorf("bench %v: exit %d, stdout %q, stderr %q; want a refusal saying %q", tc.args, code, out.String(), errb.String(), tc.want)
		}
	}
	// Nothing was made on the server.
	c, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if p, err := c.ListMemoryStores(ctx, client.ListMemoryStoresParams{}); err != nil || len(p.Data) != 0 {
		t.Errorf("stores after refused runs: %v, %v", p, err)
	}
	if p, err := c.ListAgents(ctx, api.AgentListParams{}); err != nil || len(p.Data) != 0 {
		t.Errorf("agents after refused runs: %v, %v", p, err)
	}

	// A server that is not there is said so, once.
	var out, errb bytes.Buffer
	code := run(ctx, []string{"bench", "--base-url", "http://127.0.0.1:1", "--api-key", "k", "--duration", "1s"}, testStreams(&out, &errb))
	if code != 1 || !strings.Contains(errb.String(), "cannot reach the server at http://127.0.0.1:1") {
		t.Errorf("bench against nothing: exit %d, %q", code, errb.String())
	}
}
