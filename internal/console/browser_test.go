package console_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storearchive"
	"github.com/memstore/memstore/internal/testserver"
	"github.com/memstore/memstore/worker"
)

// ScreenshotsVar, set to 1, makes the browser test save screenshots of the
// main pages into docs/ (README.md and docs/console.md show them).
const screenshotsVar = "MEMSTORE_SCREENSHOTS"

// xss is text that would run script if any page put it into HTML
// unescaped; the pages must show it as text.
const xss = `<img src=x onerror="document.body.dataset.pwned=1"><script>document.body.dataset.pwned=1</script>`

// chromium finds Debian's chromium (which .ci/run installs).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("browser tests need chromium (apt-get install chromium; .ci/run installs it)")
	return ""
}

// browserTab is one headless Chromium tab on a console.
type browserTab struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// run runs actions, failing the test on error. Each step has a generous
// bound so that a page that never shows what is awaited fails instead of
// hanging the suite; it asserts nothing about speed.
func (b *browserTab) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	browserRun(b, chromedp.Steps(actions...))
}

// browserRun runs one action that returns a value.
func browserRun[T any](b *browserTab, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		main, _ := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("main")))
		b.t.Fatalf("browser at %s: %v; the page says:\n%s", loc, err, main)
	}
	return v
}

// leave runs actions that load a new page (a submit, a click on a form
// button) and waits until the old page is gone, so that what follows sees
// the answer, never the page the request came from.
func (b *browserTab) leave(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	mark := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`document.body.dataset.left = "1"; true`)(ctx, t)
		return err
	})
	b.run(append(append([]chromedp.Action[chromedp.Void]{mark}, actions...), chromedp.WaitVisible(chromedp.CSS(`body:not([data-left])`)))...)
}

func (b *browserTab) text(sel string) string {
	b.t.Helper()
	return browserRun(b, chromedp.Text(chromedp.CSS(sel)))
}

func (b *browserTab) value(sel string) string {
	b.t.Helper()
	return browserRun(b, chromedp.Value(chromedp.CSS(sel)))
}

func (b *browserTab) location() string {
	b.t.Helper()
	return browserRun(b, chromedp.Location())
}

// noScriptRan checks that no injected markup became live.
func (b *browserTab) noScriptRan(where string) {
	b.t.Helper()
	pwned := browserRun(b, chromedp.Evaluate[bool](`document.body.dataset.pwned === "1"`))
	injected := browserRun(b, chromedp.Evaluate[int](`document.querySelectorAll("main img, main script").length`))
	if pwned || injected > 0 {
		b.t.Fatalf("%s: injected markup became live (script ran: %v, injected elements: %d)", where, pwned, injected)
	}
}

// screenshot saves the page into docs/ when MEMSTORE_SCREENSHOTS=1.
func (b *browserTab) screenshot(name string) {
	b.t.Helper()
	if os.Getenv(screenshotsVar) != "1" {
		return
	}
	// Quality 100 is a lossless PNG: crisp text.
	img := browserRun(b, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "console-"+name+".png"), img, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// TestBrowser walks the console in a real headless Chromium, one browser
// for every flow: sign-in, stores, editing with a conflict, history,
// restore, redaction, export and import, a live session, XSS, sign-out.
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, testserver.Options{Console: true, MountPrefix: mnt})
	ctx := context.Background()
	if _, err := app.NewUsers(srv.Store, nil, nil).Create(ctx, "ada", testPassword); err != nil {
		t.Fatal(err)
	}
	admin := srv.Admin(t)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first call starts the browser; it must not run under a timeout.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &browserTab{t: t, ctx: bctx, base: srv.URL}

	t.Run("sign in", func(t *testing.T) {
		b.t = t
		b.run(chromedp.Navigate(b.base+"/console/"), chromedp.WaitVisible(chromedp.CSS(`input[name=name]`)))
		b.screenshot("login")
		b.leave(chromedp.SendKeys(chromedp.CSS(`input[name=name]`), "ada"),
			chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "wrong password"),
			chromedp.Click(chromedp.CSS(`form button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`.error`)))
		if got := b.text(".error"); !strings.Contains(got, "Wrong name or password") {
			t.Fatalf("wrong password shows %q", got)
		}
		// By keyboard alone: the name field has the focus, Tab moves to the
		// password, Enter signs in.
		b.run(chromedp.Navigate(b.base + "/console/login"))
		b.leave(chromedp.KeyEvent("ada\t"+testPassword+"\r"), chromedp.WaitVisible(`//h1[text()="Memory stores"]`))
	})

	var storeID, memoryID string
	t.Run("create a store and a memory, edit it", func(t *testing.T) {
		b.t = t
		b.leave(chromedp.SendKeys(chromedp.CSS(`form[action="/console/stores"] input[name=name]`), "Team notes"),
			chromedp.Submit(chromedp.CSS(`form[action="/console/stores"] input[name=name]`)),
			chromedp.WaitVisible(`//h2[text()="New memory"]`))
		loc := b.location()
		storeID = strings.Split(strings.TrimPrefix(loc, b.base+"/console/stores/"), "/")[0]
		b.leave(chromedp.SetValue(chromedp.CSS(`textarea[name=content]`), "first line\nsecond line"),
			chromedp.SetValue(chromedp.CSS(`form[action$="/memories"] input[name=path]`), "/todo.md"),
			chromedp.Submit(chromedp.CSS(`form[action$="/memories"] input[name=path]`)),
			chromedp.WaitVisible(`//h2[text()="Edit"]`))
		loc = b.location()
		memoryID = loc[strings.LastIndexByte(loc, '/')+1:]
		b.leave(chromedp.SetValue(chromedp.CSS(`textarea[name=content]`), "first line\nsecond line, edited"),
			chromedp.Submit(chromedp.CSS(`textarea[name=content]`)),
			chromedp.WaitVisible(`//h2[text()="Edit"]`))
		m, err := admin.GetMemory(ctx, storeID, memoryID, client.GetMemoryParams{})
		if err != nil || m.Content == nil || *m.Content != "first line\nsecond line, edited" {
			t.Fatalf("after the console's edit the API has %v, %v", m, err)
		}
		b.screenshot("memory")
	})

	t.Run("a conflicting edit from the API loses neither text", func(t *testing.T) {
		b.t = t
		b.run(chromedp.Navigate(b.base+"/console/stores/"+storeID+"/memories/"+memoryID),
			chromedp.WaitVisible(chromedp.CSS(`textarea[name=content]`)),
			chromedp.SetValue(chromedp.CSS(`textarea[name=content]`), "mine: typed in the console"))
		theirs := "theirs: written through the API"
		if _, err := admin.UpdateMemory(ctx, storeID, memoryID, api.UpdateMemoryRequest{Content: &theirs}); err != nil {
			t.Fatal(err)
		}
		b.leave(chromedp.Submit(chromedp.CSS(`textarea[name=content]`)), chromedp.WaitVisible(chromedp.CSS(`.conflict`)))
		if got := b.value(`textarea[name=content]`); got != "mine: typed in the console" {
			t.Fatalf("after the conflict the editor holds %q, want the typed text", got)
		}
		if got := b.text(`pre.theirs`); got != theirs {
			t.Fatalf("their version shows %q, want %q", got, theirs)
		}
		if got := b.text(`.conflict pre.diff`); !strings.Contains(got, "- "+theirs) || !strings.Contains(got, "+ mine: typed in the console") {
			t.Fatalf("the conflict diff is %q", got)
		}
		m, _ := admin.GetMemory(ctx, storeID, memoryID, client.GetMemoryParams{})
		if *m.Content != theirs {
			t.Fatalf("the refused save changed the memory to %q", *m.Content)
		}
		b.screenshot("conflict")
		// Saving again, having seen theirs, replaces it knowingly.
		b.leave(chromedp.Submit(chromedp.CSS(`textarea[name=content]`)), chromedp.WaitNotPresent(chromedp.CSS(`.conflict`)))
		if m, _ := admin.GetMemory(ctx, storeID, memoryID, client.GetMemoryParams{}); *m.Content != "mine: typed in the console" {
			t.Fatalf("the second save left %q", *m.Content)
		}
	})

	t.Run("history: diff, restore, redact", func(t *testing.T) {
		b.t = t
		versions, err := admin.ListMemoryVersions(ctx, storeID, client.ListMemoryVersionsParams{MemoryID: memoryID})
		if err != nil || len(versions.Data) != 4 {
			t.Fatalf("versions: %d, %v; want 4 (created, edited, theirs, mine)", len(versions.Data), err)
		}
		first, head := versions.Data[3], versions.Data[0]
		b.run(chromedp.Navigate(b.base+"/console/stores/"+storeID+"/memories/"+memoryID+"/history"),
			chromedp.WaitVisible(`//h1[starts-with(text(), "History of")]`))
		b.screenshot("history")
		b.run(chromedp.Click(chromedp.CSS(`input[name=from][value="`+first.ID+`"]`)),
			chromedp.Click(chromedp.CSS(`button[form=diffform]`)),
			chromedp.WaitVisible(chromedp.CSS(`pre.diff`)))
		if got := b.text(`pre.diff`); !strings.Contains(got, "- first line") || !strings.Contains(got, "+ mine: typed in the console") {
			t.Fatalf("diff from the first version to the head: %q", got)
		}
		b.screenshot("diff")

		b.run(chromedp.Navigate(b.base + "/console/stores/" + storeID + "/memories/" + memoryID + "/history"))
		b.leave(chromedp.Click(chromedp.CSS(`button[aria-label="restore `+first.ID+`"]`)),
			chromedp.WaitVisible(`//h2[text()="Edit"]`))
		m, _ := admin.GetMemory(ctx, storeID, memoryID, client.GetMemoryParams{})
		if *m.Content != "first line\nsecond line" || m.MemoryVersionID == first.ID {
			t.Fatalf("restore left %q at %s; want the first text as a new version", *m.Content, m.MemoryVersionID)
		}

		// The old head is no longer current: it can be redacted, after
		// the confirmation page shows what will be erased.
		b.run(chromedp.Navigate(b.base + "/console/stores/" + storeID + "/memories/" + memoryID + "/history"))
		b.leave(chromedp.Click(chromedp.CSS(`a[aria-label="redact `+head.ID+`"]`)),
			chromedp.WaitVisible(`//button[text()="Redact this version for good"]`))
		if got := b.text(`pre.content`); got != "mine: typed in the console" {
			t.Fatalf("the confirmation shows %q, want the text it would erase", got)
		}
		if v, _ := admin.GetMemoryVersion(ctx, storeID, head.ID); v.RedactedAt != nil {
			t.Fatal("asking for confirmation already redacted the version")
		}
		b.screenshot("redact")
		b.leave(chromedp.Click(`//button[text()="Redact this version for good"]`),
			chromedp.WaitVisible(`//h1[starts-with(text(), "History of")]`))
		if v, _ := admin.GetMemoryVersion(ctx, storeID, head.ID); v.RedactedAt == nil || v.Content != nil {
			t.Fatalf("version %s after redact: %+v", head.ID, v)
		}
		// The current head cannot be redacted, so its row offers no Redact.
		if n := browserRun(b, chromedp.Evaluate[int](`document.querySelectorAll('a[aria-label="redact `+m.MemoryVersionID+`"]').length`)); n != 0 {
			t.Fatal("the history offers Redact on the current version")
		}
	})

	t.Run("export and import give the same files", func(t *testing.T) {
		b.t = t
		for path, content := range map[string]string{"/notes/a.md": "alpha", "/notes/deep/b.md": "beta " + xss, "/" + xss + ".md": "gamma"} {
			m, err := admin.CreateMemory(ctx, storeID, api.CreateMemoryRequest{Path: path, Content: content})
			if err != nil {
				t.Fatal(err)
			}
			// The memory's page shows its path, text and editor as text.
			b.run(chromedp.Navigate(b.base+"/console/stores/"+storeID+"/memories/"+m.ID), chromedp.WaitVisible(chromedp.CSS(`textarea[name=content]`)))
			b.noScriptRan("the memory page of " + path)
			if got := b.value(`textarea[name=content]`); got != content {
				t.Fatalf("the editor of %s holds %q, want %q", path, got, content)
			}
		}
		b.run(chromedp.Navigate(b.base+"/console/stores/"+storeID+"/"), chromedp.WaitVisible(chromedp.CSS(`table.tree`)))
		b.noScriptRan("tree with an XSS path")
		b.screenshot("tree")
		b64 := browserRun(b, chromedp.Evaluate[string](`fetch("/console/stores/`+storeID+`/export?format=zip").then(r => r.arrayBuffer()).then(buf => { let s = ""; for (const x of new Uint8Array(buf)) s += String.fromCharCode(x); return btoa(s); })`, chromedp.EvalAwaitPromise))
		zipped, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatal(err)
		}
		exported, _, err := storearchive.Read(storearchive.Zip, zipped, api.MaxContentBytes, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if want := filesOf(t, admin, storeID); !sameFiles(exported, want) {
			t.Fatalf("export holds %v, the store %v", names(exported), names(want))
		}
		archive := filepath.Join(t.TempDir(), "notes.zip")
		os.WriteFile(archive, zipped, 0o600)

		other, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "Copy " + xss})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CreateMemory(ctx, other.ID, api.CreateMemoryRequest{Path: "/notes/a.md", Content: "an older alpha"}); err != nil {
			t.Fatal(err)
		}
		b.run(chromedp.Navigate(b.base+"/console/"), chromedp.WaitVisible(chromedp.CSS(`table`)))
		b.noScriptRan("the stores list with a name made of markup")
		b.screenshot("stores")
		b.run(chromedp.Navigate(b.base + "/console/stores/" + other.ID + "/"))
		b.noScriptRan("a store named with markup")
		b.leave(chromedp.SetUploadFiles(chromedp.CSS(`input[type=file]`), []string{archive}),
			chromedp.Submit(chromedp.CSS(`input[type=file]`)),
			chromedp.WaitVisible(`//button[text()="Import as shown"]`))
		if got := filesOf(t, admin, other.ID); len(got) != 1 || string(got[0].Content) != "an older alpha" {
			t.Fatalf("the preview changed the store: %q", got)
		}
		if got := b.text(`main`); !strings.Contains(got, "3 to create, 1 to change, 0 already the same, 0 refused") {
			t.Fatalf("the preview says:\n%s", got)
		}
		b.screenshot("import")
		b.leave(chromedp.Click(`//button[text()="Import as shown"]`), chromedp.WaitVisible(`//a[text()="Back to the store"]`))
		if got := filesOf(t, admin, other.ID); !sameFiles(got, exported) {
			t.Fatalf("after import the copy holds %v, want %v", names(got), names(exported))
		}
	})

	t.Run("a session's events arrive live", func(t *testing.T) {
		b.t = t
		env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "laptop"})
		if err != nil {
			t.Fatal(err)
		}
		key, err := admin.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{})
		if err != nil {
			t.Fatal(err)
		}
		agent, err := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "note-taker", Model: api.ModelConfig{ID: api.ScriptedModel}})
		if err != nil {
			t.Fatal(err)
		}
		notes, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "live"})
		if err != nil {
			t.Fatal(err)
		}
		// Not json.Marshal: it would escape < and >, and the payload must
		// reach the page as written.
		var input bytes.Buffer
		enc := json.NewEncoder(&input)
		enc.SetEscapeHTML(false)
		enc.Encode(map[string]string{"file_path": filepath.Join(mnt, "live", "learned.md"), "content": "learned " + xss})
		script, _ := json.Marshal(api.ScriptedScript{ToolCalls: []api.ScriptedToolCall{{Name: "write", Input: bytes.TrimSpace(input.Bytes())}, {Name: "bash", Input: json.RawMessage(`{"command":"echo done"}`)}}, End: "terminate"})
		sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{
			Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID,
			Resources:     []api.SessionResourceParams{{Type: "memory_store", MemoryStoreID: notes.ID}},
			InitialEvents: []api.Event{api.UserMessage(string(script))},
		})
		if err != nil {
			t.Fatal(err)
		}
		b.run(chromedp.Navigate(b.base+"/console/sessions/"+sess.ID), chromedp.WaitVisible(chromedp.CSS(`#events`)))

		// The worker starts only now: what follows arrives while the page is open.
		w, err := worker.New(worker.Config{Client: srv.Client(t), EnvironmentID: env.ID, EnvironmentKey: key.Key, WorkerID: "browser-test",
			Workdir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		defer func() { stop(); <-done }()

		b.run(chromedp.WaitVisible(chromedp.CSS(`li.event.session\.status_terminated`)))
		if got := b.text(`#status`); got != "terminated" {
			t.Fatalf("the live status shows %q, want terminated", got)
		}
		if got := b.text(`li.event.agent\.tool_use pre`); !strings.Contains(got, `"content": "learned `+strings.ReplaceAll(xss, `"`, `\"`)+`"`) {
			t.Fatalf("the live tool call shows %q", got)
		}
		if got := b.text(`li.event.user\.tool_result`); !strings.Contains(got, "wrote") {
			t.Fatalf("the live tool result shows %q", got)
		}
		b.noScriptRan("live session")
		b.screenshot("session")

		// Its environment shows the worker, its item, and mints a key once.
		b.run(chromedp.Navigate(b.base + "/console/environments/" + env.ID))
		b.leave(chromedp.Click(`//button[text()="Mint a worker key"]`), chromedp.WaitVisible(chromedp.CSS(`pre.key`)))
		if got := b.text(`main`); !strings.Contains(got, "Workers polling\n1") || !strings.Contains(got, sess.ID) {
			t.Fatalf("the environment page does not show the polling worker and the session's item:\n%s", got)
		}
		b.screenshot("environment")

		// The memory the session wrote links back to its tool call.
		var versions *api.Page[api.MemoryVersion]
		for versions == nil || len(versions.Data) == 0 {
			if versions, err = admin.ListMemoryVersions(ctx, notes.ID, client.ListMemoryVersionsParams{SessionID: sess.ID}); err != nil {
				t.Fatal(err)
			}
			if len(versions.Data) == 0 {
				<-time.After(10 * time.Millisecond) // the final sync lands after the terminated event
			}
		}
		b.run(chromedp.Navigate(b.base + "/console/stores/" + notes.ID + "/versions/" + versions.Data[0].ID))
		b.leave(chromedp.Click(`//a[text()="the tool call that wrote it"]`),
			chromedp.WaitVisible(chromedp.CSS(`li.event.agent\.tool_use:target`)))
		// The write, not the later bash call, is the tool call that wrote it.
		if target, write := browserRun(b, chromedp.Evaluate[string](`document.querySelector(":target").id`)),
			browserRun(b, chromedp.Evaluate[string](`document.querySelector("li.event.agent\\.tool_use").id`)); target != write {
			t.Fatalf("the version links to tool call %s, want the write %s", target, write)
		}
	})

	t.Run("phone width", func(t *testing.T) {
		b.t = t
		b.run(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(3), chromedp.EmulateMobile),
			chromedp.Navigate(b.base+"/console/stores/"+storeID+"/memories/"+memoryID),
			chromedp.WaitVisible(chromedp.CSS(`textarea[name=content]`)))
		overflow := browserRun(b, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
		if overflow {
			t.Fatal("the memory page is wider than a phone screen")
		}
		b.screenshot("phone")
		b.run(chromedp.EmulateReset())
	})

	t.Run("sign out", func(t *testing.T) {
		b.t = t
		b.run(chromedp.Navigate(b.base + "/console/"))
		b.leave(chromedp.Click(`//button[text()="Sign out"]`), chromedp.WaitVisible(chromedp.CSS(`input[name=password]`)),
			chromedp.Navigate(b.base+"/console/"), chromedp.WaitVisible(chromedp.CSS(`input[name=password]`)))
	})
}

func filesOf(t *testing.T, c *client.Client, storeID string) []storearchive.File {
	t.Helper()
	var out []storearchive.File
	for it, err := range c.ListAllMemories(context.Background(), storeID, client.ListMemoriesParams{View: api.ViewFull, Limit: api.MaxFullViewListLimit}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, storearchive.File{Path: it.Memory.Path, Content: []byte(*it.Memory.Content)})
	}
	return out
}

func sameFiles(a, b []storearchive.File) bool {
	if len(a) != len(b) {
		return false
	}
	sort.Slice(a, func(i, j int) bool { return a[i].Path < a[j].Path })
	sort.Slice(b, func(i, j int) bool { return b[i].Path < b[j].Path })
	for i := range a {
		if a[i].Path != b[i].Path || !bytes.Equal(a[i].Content, b[i].Content) {
			return false
		}
	}
	return true
}

func names(fs []storearchive.File) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}
