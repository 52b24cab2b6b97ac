package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/memstore/memstore/internal/testserver"
)

// newBrowser starts a headless Chromium of its own for t, on the console
// of srv, and signs in as ada.
func newBrowser(t *testing.T, srv *testserver.Server) *browserTab {
	t.Helper()
	exe := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	// The first call starts the browser; it must not run under a timeout.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &browserTab{t: t, ctx: bctx, base: srv.URL}
	b.run(chromedp.Navigate(b.base+"/console/login"), chromedp.WaitVisible(chromedp.CSS(`input[name=name]`)))
	b.leave(chromedp.SendKeys(chromedp.CSS(`input[name=name]`), "ada"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), testPassword),
		chromedp.Submit(chromedp.CSS(`input[name=password]`)),
		chromedp.WaitVisible(`//h1[text()="Memory stores"]`))
	return b
}

// click follows the link whose text is text inside the element sel (an
// XPath step such as table[@class="tree"]), as a
// person clicks it, and waits for the page it leads to.
func (b *browserTab) click(sel, text string) {
	b.t.Helper()
	b.leave(chromedp.Click(fmt.Sprintf(`//%s//a[normalize-space(text())=%q]`, sel, text)), chromedp.WaitVisible(chromedp.CSS(`main`)))
}

// shows fails unless the page is the tree of folder, with no error.
func (b *browserTab) showsFolder(folder string) {
	b.t.Helper()
	if errs := browserRun(b, chromedp.Evaluate[string](`Array.from(document.querySelectorAll(".error")).map(e => e.textContent).join("; ")`)); errs != "" {
		b.t.Fatalf("at %s the page shows an error instead of %s: %s", b.location(), folder, errs)
	}
	if got := b.text(`table.tree caption`); got != "Contents of "+folder {
		b.t.Fatalf("at %s the tree's caption is %q, want the contents of %s", b.location(), got, folder)
	}
}

// TestBrowserFollowsFolderBreadcrumbAndNextPageLinks clicks through a
// store's tree in Chromium as a person does: into nested folders whose
// names need escaping, back up by a breadcrumb, and on to a folder's
// second page.
func TestBrowserFollowsFolderBreadcrumbAndNextPageLinks(t *testing.T) {
	srv, f := startSeededConsole(t)
	b := newBrowser(t, srv)

	b.run(chromedp.Navigate(b.base + "/console/"))
	// The store's id is shown with a Copy button (the script shows it);
	// a click selects the whole id and copies it where the page may.
	copyID := `button.copy[data-copy="` + f.StoreID + `"]`
	b.run(chromedp.WaitVisible(chromedp.CSS(copyID)), chromedp.Click(chromedp.CSS(copyID)))
	if got := browserRun(b, chromedp.Evaluate[string](`window.getSelection().toString()`)); got != f.StoreID {
		t.Fatalf("the Copy button selected %q, want the store id %s", got, f.StoreID)
	}
	b.run(chromedp.WaitVisible(`//button[@data-copy="` + f.StoreID + `"][text()="Copied" or text()="Selected: press Ctrl+C"]`))
	b.click(`table`, "Team notes")
	b.showsFolder("/")

	b.click(`table[@class="tree"]`, "decisions/")
	b.showsFolder("/decisions/")
	b.click(`table[@class="tree"]`, "2026 Q1 & Q2/")
	b.showsFolder("/decisions/2026 Q1 & Q2/")
	b.click(`table[@class="tree"]`, "100% done/")
	b.showsFolder(f.Nested)
	if got := b.text(`table.tree tbody`); !strings.Contains(got, "shipped.md") {
		t.Fatalf("the deepest folder lists %q, want shipped.md", got)
	}
	b.screenshot("tree-folder")

	b.click(`nav[@aria-label="Folder"]`, "decisions/")
	b.showsFolder("/decisions/")
	if got := b.text(`table.tree tbody`); !strings.Contains(got, "adr-1.md") || strings.Contains(got, "shipped.md") {
		t.Fatalf("after the breadcrumb the tree lists %q, want /decisions/'s own entries", got)
	}
	b.click(`nav[@aria-label="Folder"]`, "/")
	b.showsFolder("/")

	b.click(`table[@class="tree"]`, "log/")
	b.showsFolder(f.Paged)
	first := b.text(`table.tree tbody`)
	if !strings.Contains(first, "entry-000.md") || strings.Contains(first, fmt.Sprintf("entry-%03d.md", pagedFolderSize-1)) {
		t.Fatalf("the first page of %s lists %q", f.Paged, first)
	}
	b.click(`main`, "Next page")
	b.showsFolder(f.Paged)
	second := b.text(`table.tree tbody`)
	if !strings.Contains(second, fmt.Sprintf("entry-%03d.md", pagedFolderSize-1)) || strings.Contains(second, "entry-000.md") {
		t.Fatalf("the second page of %s lists %q, want the entries after the first page", f.Paged, second)
	}
}
