package server

import (
	"bytes"
	"os"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/secret"
)

// Keys and tokens are stored only as their hashes (issue 2, SPEC §6), and
// the work secret exists only in the poll response that claims the item
// (SPEC §3): the database files on disk hold the hash of every credential
// and none of the secrets, and no other response about the item carries it.
func TestSecretsAreHashedAtRestAndTheWorkSecretIsShownOnce(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	envKey := e.envKey(env.ID)
	e.session(env.ID, e.scriptedAgent().ID, nil)
	w, sec := e.poll(env.ID, envKey, "w")
	if w == nil || sec.SessionsToken == "" {
		t.Fatal("nothing claimed")
	}
	// The token is used, so its row is read back, not only written.
	e.heartbeat(env.ID, w.ID, sec.SessionsToken, api.NoHeartbeat)

	for _, r := range []cpResp{
		e.must(200, "GET", "/v1/environments/"+env.ID+"/work/"+w.ID, e.apiKey, nil, nil),
		e.must(200, "GET", "/v1/environments/"+env.ID+"/work", e.apiKey, nil, nil),
		e.must(200, "POST", "/v1/environments/"+env.ID+"/work/"+w.ID+"/ack", envKey, nil, nil),
		e.must(200, "POST", "/v1/environments/"+env.ID+"/work/"+w.ID, e.apiKey, map[string]any{"metadata": map[string]string{"k": "v"}}, nil),
	} {
		if bytes.Contains(r.body, []byte(*w.Secret)) || bytes.Contains(r.body, []byte(sec.SessionsToken)) {
			t.Fatalf("a response other than the poll carries the work secret: %s", r.body)
		}
		var probe any
		r.decode(t, &probe)
		if one, ok := probe.(map[string]any); ok && one["secret"] != nil {
			t.Fatalf("secret = %v outside the poll response", one["secret"])
		}
	}

	var disk []byte
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(e.dbPath + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		disk = append(disk, b...)
	}
	for name, sent := range map[string]string{"API key": e.apiKey, "environment key": envKey, "sessions token": sec.SessionsToken, "work secret": *w.Secret} {
		if bytes.Contains(disk, []byte(sent)) {
			t.Errorf("the %s is stored in the clear", name)
		}
		if name != "work secret" && !bytes.Contains(disk, []byte(secret.Hash(sent))) {
			t.Errorf("the %s's hash is not in the database files (is the scan looking at the right files?)", name)
		}
	}
}
