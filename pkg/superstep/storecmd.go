//go:build !superstep.lambda

package superstep

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/longterm"
)

// The store commands: the long-term store of a dev server (/v1/store).

func newStoreCmd(env Env) *cobra.Command {
	var f serverFlags
	c := &cobra.Command{
		Use:   "store",
		Short: "Get, put, search, delete and list the long-term store's items (agents' memories)",
		Long: `The long-term store keeps JSON items (an agent's memories of a person:
preferences, facts, past decisions) under hierarchical namespaces, written
as their components joined by '/': users/u-42/prefs. Items outlive threads
and runs; nodes reach the store through their context, agents through
their memory tools (pkg/agent/memorytools).

The commands talk to a running "superstep dev" server (or a deployment's
API) over its HTTP API, like "superstep threads": --server (default
$` + ServerEnv + ` or ` + DefaultServer + `) and --token (default $` + TokenEnv + `). 4xx
answers exit with code 2, other failures with 1.`,
		Example: `  superstep store put users/u-42/prefs drink '{"text": "green tea, no sugar"}'
  superstep store put users/u-42/session last '{"page": 3}' --ttl 24h
  superstep store get users/u-42/prefs drink
  superstep store ls users/u-42 --filter '{"kind": "pref"}'
  superstep store search users/u-42 "what does she drink?"
  superstep store delete users/u-42/prefs drink
  superstep store ls --namespaces`,
		Args: noArgs,
		RunE: groupRunE,
	}
	f.register(c, env, DefaultServer)
	c.AddCommand(newStoreGetCmd(env, &f), newStorePutCmd(env, &f), newStoreDeleteCmd(env, &f), newStoreLsCmd(env, &f), newStoreSearchCmd(env, &f))
	return c
}

// parseNS reads a NAMESPACE argument.
func parseNS(c *cobra.Command, s string) (longterm.Namespace, error) {
	ns, err := longterm.ParseNamespace(s)
	if err != nil {
		return nil, usageErr(c, fmt.Errorf("namespace %q: %s", s, strings.TrimPrefix(err.Error(), longterm.ErrInvalid.Error()+": ")))
	}
	return ns, nil
}

func itemQuery(ns longterm.Namespace, key string) url.Values {
	return url.Values{"namespace": {ns.String()}, "key": {key}}
}

// printItem shows an item: its namespace and key, times, and value.
func printItem(env Env, it longterm.Item) {
	fmt.Fprintf(env.Stdout, "%s %s (updated %s", it.Namespace, it.Key, fmtTime(it.UpdatedAt))
	if it.ExpiresAt != nil {
		fmt.Fprintf(env.Stdout, ", expires %s", fmtTime(*it.ExpiresAt))
	}
	if it.Score != nil {
		fmt.Fprintf(env.Stdout, ", score %.3f", *it.Score)
	}
	fmt.Fprintf(env.Stdout, ")\n  %s\n", it.Value)
}

// searchItems asks the server for the items req selects, with the filter
// given (a JSON object) unless it is empty. With --json it prints the
// server's answer and returns no page.
func searchItems(c *cobra.Command, env Env, f *serverFlags, req api.SearchItemsRequest, filter []byte) (*longterm.Page, error) {
	if len(filter) > 0 {
		if err := json.Unmarshal(filter, &req.Filter); err != nil {
			return nil, usageErr(c, fmt.Errorf("--filter must be a JSON object such as '{\"kind\": \"pref\"}'"))
		}
	}
	var page longterm.Page
	raw, err := f.call(c.Context(), http.MethodPost, "/v1/store/items/search", nil, req, &page)
	if err != nil {
		return nil, err
	}
	if f.json {
		return nil, writeRaw(env.Stdout, raw)
	}
	return &page, nil
}

func newStoreGetCmd(env Env, f *serverFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAMESPACE KEY",
		Short: "Show an item",
		Args:  exactArgs("NAMESPACE", "KEY"),
		RunE: func(c *cobra.Command, args []string) error {
			ns, err := parseNS(c, args[0])
			if err != nil {
				return err
			}
			var it longterm.Item
			raw, err := f.call(c.Context(), http.MethodGet, "/v1/store/items", itemQuery(ns, args[1]), nil, &it)
			if err != nil {
				return err
			}
			if f.json {
				return writeRaw(env.Stdout, raw)
			}
			printItem(env, it)
			return nil
		},
	}
}

func newStorePutCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		ttl     time.Duration
		index   []string
		noIndex bool
	)
	c := &cobra.Command{
		Use:   "put NAMESPACE KEY VALUE",
		Short: "Put an item (a JSON object: JSON, @FILE or -), replacing the one there",
		Long: `Put an item: its value is a JSON object, given as JSON, @FILE or - (standard
input). An item already there is replaced (the last put wins). With --ttl
it expires that long after this put.`,
		Args: exactArgs("NAMESPACE", "KEY", "VALUE"),
		RunE: func(c *cobra.Command, args []string) error {
			ns, err := parseNS(c, args[0])
			if err != nil {
				return err
			}
			value, err := readJSONArg("value", args[2], env.Stdin)
			if err != nil {
				return usageErr(c, err)
			}
			req := api.PutItemRequest{Namespace: ns, Key: args[1], Value: value, TTLSeconds: ttl.Seconds()}
			if c.Flags().Changed("index") || noIndex {
				idx := index
				if noIndex {
					idx = []string{}
				}
				req.Index = &idx
			}
			var it longterm.Item
			raw, err := f.call(c.Context(), http.MethodPut, "/v1/store/items", nil, req, &it)
			if err != nil {
				return err
			}
			if f.json {
				return writeRaw(env.Stdout, raw)
			}
			fmt.Fprintf(env.Stdout, "put %s %s\n", it.Namespace, it.Key)
			return nil
		},
	}
	c.Flags().DurationVar(&ttl, "ttl", 0, "expire the item this long after the put (e.g. 24h); default: never")
	c.Flags().StringSliceVar(&index, "index", nil, "the value's `FIELDS` to embed for semantic search, instead of the server's")
	c.Flags().BoolVar(&noIndex, "no-index", false, "do not embed this item (semantic search does not find it)")
	return c
}

func newStoreDeleteCmd(env Env, f *serverFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAMESPACE KEY",
		Short: "Delete an item (deleting a missing one is not an error)",
		Args:  exactArgs("NAMESPACE", "KEY"),
		RunE: func(c *cobra.Command, args []string) error {
			ns, err := parseNS(c, args[0])
			if err != nil {
				return err
			}
			if _, err := f.call(c.Context(), http.MethodDelete, "/v1/store/items", itemQuery(ns, args[1]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "deleted %s %s\n", ns, args[1])
			return nil
		},
	}
}

func newStoreLsCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		filter     string
		limit      int
		pageToken  string
		namespaces bool
		depth      int
	)
	c := &cobra.Command{
		Use:   "ls [NAMESPACE]",
		Short: "List the items under a namespace (it and those below it), or with --namespaces the namespaces",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var ns longterm.Namespace
			if len(args) == 1 {
				var err error
				if ns, err = parseNS(c, args[0]); err != nil {
					return err
				}
			}
			if namespaces {
				q := url.Values{}
				if len(ns) > 0 {
					q.Set("prefix", ns.String())
				}
				if depth > 0 {
					q.Set("max_depth", strconv.Itoa(depth))
				}
				var out api.Namespaces
				raw, err := f.call(c.Context(), http.MethodGet, "/v1/store/namespaces", q, nil, &out)
				if err != nil {
					return err
				}
				if f.json {
					return writeRaw(env.Stdout, raw)
				}
				for _, n := range out.Namespaces {
					fmt.Fprintln(env.Stdout, n)
				}
				return nil
			}
			if len(ns) == 0 {
				return usageErr(c, fmt.Errorf("name the NAMESPACE to list (users/u-42), or list namespaces with --namespaces"))
			}
			req := api.SearchItemsRequest{NamespacePrefix: ns, Limit: limit, PageToken: pageToken}
			var filterJSON []byte
			if filter != "" {
				raw, err := readJSONArg("filter", filter, env.Stdin)
				if err != nil {
					return usageErr(c, err)
				}
				filterJSON = raw
			}
			page, err := searchItems(c, env, f, req, filterJSON)
			if err != nil || page == nil {
				return err
			}
			tw := newTable(env.Stdout)
			fmt.Fprintln(tw, "NAMESPACE\tKEY\tUPDATED\tVALUE")
			for _, it := range page.Items {
				v := string(it.Value)
				if len(v) > 60 {
					v = v[:57] + "..."
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.Namespace, it.Key, fmtTime(it.UpdatedAt), v)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			morePages(env, "items", page.NextPageToken)
			return nil
		},
	}
	c.Flags().StringVar(&filter, "filter", "", "only items whose value fields match: `JSON` such as '{\"kind\": \"pref\", \"score\": {\"$gte\": 3}}'")
	c.Flags().IntVar(&limit, "limit", 0, "at most this many items (server default 100, at most 1000)")
	c.Flags().StringVar(&pageToken, "page-token", "", "continue a previous listing")
	c.Flags().BoolVar(&namespaces, "namespaces", false, "list the namespaces (under NAMESPACE, if given) instead of items")
	c.Flags().IntVar(&depth, "max-depth", 0, "with --namespaces, cut them to this many components")
	return c
}

func newStoreSearchCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		limit  int
		filter string
	)
	c := &cobra.Command{
		Use:   "search NAMESPACE QUERY",
		Short: "Search the items under a namespace by meaning (needs an embedding model on the server)",
		Args:  exactArgs("NAMESPACE", "QUERY"),
		RunE: func(c *cobra.Command, args []string) error {
			ns, err := parseNS(c, args[0])
			if err != nil {
				return err
			}
			req := api.SearchItemsRequest{NamespacePrefix: ns, Query: args[1], Limit: limit}
			page, err := searchItems(c, env, f, req, []byte(filter))
			if err != nil || page == nil {
				return err
			}
			for _, it := range page.Items {
				printItem(env, it)
			}
			return nil
		},
	}
	c.Flags().IntVar(&limit, "limit", 0, "at most this many results (default 10)")
	c.Flags().StringVar(&filter, "filter", "", "only items whose value fields match (`JSON`)")
	return c
}
