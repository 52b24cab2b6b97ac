package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// compose.yaml cannot run here (no Docker engine), so it is kept honest
// another way: every memstore command in it — each memstore service's
// command and the setup commands its header shows — is looked up in the
// real CLI, each flag must be one that command has, and each variable
// given to a memstore service must be one its command reads (named in
// its -h, or read by the command's code).
func TestComposeFileMatchesTheCLI(t *testing.T) {
	raw, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string
			Command     []string
			Environment map[string]string
		}
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	bin := memstoreBinary(t)
	code := commandSource(t)
	checked := 0
	for name, svc := range compose.Services {
		if !strings.HasPrefix(svc.Image, "memstore") {
			continue
		}
		help := checkCommand(t, bin, "service "+name, svc.Command)
		for v := range svc.Environment {
			if !strings.Contains(help, v) && !strings.Contains(code, `"`+v+`"`) {
				t.Errorf("service %s: %s is read by neither `memstore %s` (see its -h) nor its code", name, v, strings.Join(verbs(svc.Command), " "))
			}
		}
		checked++
	}
	setup := regexp.MustCompile(`exec \S+ memstore ([^)]*)`)
	for _, line := range strings.Split(string(raw), "\n") {
		if m := setup.FindStringSubmatch(line); strings.HasPrefix(line, "#") && m != nil {
			checkCommand(t, bin, "header", strings.Fields(m[1]))
			checked++
		}
	}
	if checked < 5 {
		t.Fatalf("checked %d memstore commands in compose.yaml; expected two servers, a worker and two setup commands", checked)
	}
}

// verbs are a command line's leading words: the command and subcommands.
func verbs(args []string) []string {
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			return args[:i]
		}
	}
	return args
}

// checkCommand asks the real CLI for the help of args' command and checks
// that each of args' flags is listed in it; it returns the help.
func checkCommand(t *testing.T, bin, where string, args []string) string {
	t.Helper()
	v := verbs(args)
	out, _ := exec.Command(bin, slices.Concat(v, []string{"-h"})...).CombinedOutput()
	help := string(out)
	if !strings.Contains(help, "memstore "+strings.Join(v, " ")+" ") && !strings.Contains(help, "memstore "+strings.Join(v, " ")+":") {
		t.Errorf("%s: `memstore %s` is not a command:\n%s", where, strings.Join(v, " "), help)
		return help
	}
	for _, a := range args[len(v):] {
		if !strings.HasPrefix(a, "-") {
			continue // a flag's value or an argument
		}
		flag, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !regexp.MustCompile(`(?m)^\s+--?` + regexp.QuoteMeta(flag) + `\b`).MatchString(help) {
			t.Errorf("%s: `memstore %s` has no flag --%s", where, strings.Join(v, " "), flag)
		}
	}
	return help
}

// commandSource is the code of the memstore command (not its tests), where
// the variables its flags do not name are read.
func commandSource(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(src)
	}
	return b.String()
}
