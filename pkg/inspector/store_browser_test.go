package inspector_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// storeAPI calls the server's /v1/store with the token and returns the
// status and body.
func storeAPI(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// checkStorePage browses the long-term store's namespaces in the browser
// (its token given already), edits an item, is refused a bad value with
// what to fix, and deletes the item: each change checked through the API.
// TestInspectorInBrowser runs it, on its browser.
func checkStorePage(t *testing.T, b *browser, srv *httptest.Server) {
	for _, put := range []string{
		`{"namespace":["users","u-42","prefs"],"key":"drink","value":{"text":"green tea"}}`,
		`{"namespace":["users","u-42","prefs"],"key":"seat","value":{"text":"aisle"}}`,
		`{"namespace":["users","u-7"],"key":"drink","value":{"text":"coffee"}}`,
	} {
		if code, body := storeAPI(t, srv, "PUT", "/v1/store/items", put); code != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", put, code, body)
		}
	}
	get := func(key string) (int, string) {
		return storeAPI(t, srv, "GET", "/v1/store/items?namespace=users/u-42/prefs&key="+url.QueryEscape(key), "")
	}

	b.run("open the store", chromedp.Navigate(srv.URL+"/#/store"),
		chromedp.WaitVisible(chromedp.CSS(`#store-namespaces a[data-ns="users/u-42/prefs"]`)))
	b.clean("store")
	b.run("open users/u-42/prefs", chromedp.Click(chromedp.CSS(`#store-namespaces a[data-ns="users/u-42/prefs"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#store-items tr[data-key="drink"]`)))
	if n := read(b, "count items", chromedp.Evaluate[int](`document.querySelectorAll('#store-items tr[data-key]').length`)); n != 2 {
		t.Errorf("users/u-42/prefs shows %d items, want 2", n)
	}
	b.shot("16-store")

	// Edit an item.
	b.run("edit drink", chromedp.Click(chromedp.CSS(`#store-items tr[data-key="drink"] button.edit-item`)),
		setValue(`#item-value`, `{"text": "oolong"}`), chromedp.Click(chromedp.CSS(`#put-item`)),
		chromedp.WaitVisible(`//table[@id="store-items"]//tr[@data-key="drink"]//pre[contains(., "oolong")]`))
	var it struct{ Value json.RawMessage }
	if code, body := get("drink"); code != http.StatusOK || json.Unmarshal([]byte(body), &it) != nil || string(it.Value) != `{"text":"oolong"}` {
		t.Errorf("after the edit the store answers %d %s", code, body)
	}
	b.clean("edited")

	// Bad values: refused, saying what to fix; the store unchanged.
	b.run("put a value that is not an object", setValue(`#item-key`, `k2`), setValue(`#item-value`, `[1, 2]`), chromedp.Click(chromedp.CSS(`#put-item`)))
	b.expectError("must be a JSON object")
	b.run("put into a bad namespace", setValue(`#item-ns`, `users/`+strings.Repeat("x", 130)), setValue(`#item-value`, `{}`), chromedp.Click(chromedp.CSS(`#put-item`)))
	b.expectError("the most is 128")
	if code, body := get("k2"); code != http.StatusNotFound {
		t.Errorf("a refused put stored k2: %d %s", code, body)
	}

	// Delete it.
	b.run("delete drink", chromedp.Navigate(srv.URL+"/#/store/users%2Fu-42%2Fprefs"),
		chromedp.WaitVisible(chromedp.CSS(`#store-items tr[data-key="drink"]`)),
		chromedp.Click(chromedp.CSS(`#store-items tr[data-key="drink"] button.delete-item`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#store-items tr[data-key="drink"]`)))
	if code, body := get("drink"); code != http.StatusNotFound {
		t.Errorf("after the delete: %d %s, want 404", code, body)
	}
	b.shot("17-store-deleted")
	b.clean("deleted")
}
