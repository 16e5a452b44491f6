package bedrock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/agent/bedrock"
	"github.com/superstep/superstep/pkg/agent/bedrock/bedrocktest"
	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/longterm/longtermtest"
)

// wordVectors embeds a text as the counts of longtermtest.Vocabulary's
// words in it, padded to dims: the fake model's vectors.
func wordVectors(text string, dims int) []float32 {
	w := longtermtest.WordEmbedder{Vocabulary: longtermtest.Vocabulary}
	v, _ := w.Embed(context.Background(), []string{text})
	return append(v[0], make([]float32, dims-len(v[0]))...)
}

// TestEmbedderSearch runs semantic search through the Bedrock adapter on
// the fake InvokeModel server: the corpus ranks as the vectors say, and
// every call is Titan Text Embeddings V2's wire format.
func TestEmbedderSearch(t *testing.T) {
	srv := bedrocktest.NewEmbed(wordVectors)
	defer srv.Close()
	emb, err := bedrock.NewEmbedder(srv.Client(), bedrock.TitanEmbedV2, 256)
	if err != nil {
		t.Fatal(err)
	}
	s := longterm.New(longterm.NewMemory(), longterm.WithEmbedder(emb, "text"))
	ns := longterm.Namespace{"users", "u-7", "prefs"}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range longtermtest.Corpus {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		if _, err := s.Put(t.Context(), ns, k, json.RawMessage(fmt.Sprintf(`{"text":%q}`, longtermtest.Corpus[k]))); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"a green tea", []string{"tea", "coffee"}},
		{"which hotel is quiet", []string{"hotel"}},
		{"aisle seats on flights", []string{"flights"}},
	} {
		res, err := s.Search(t.Context(), longterm.Namespace{"users", "u-7"}, longterm.SearchOptions{Query: tc.query, Limit: len(tc.want)})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range res {
			got = append(got, it.Key)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Search(%q) = %q, want %q", tc.query, got, tc.want)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != len(keys)+3 {
		t.Errorf("%d InvokeModel calls, want %d (one per item, one per query)", len(reqs), len(keys)+3)
	}
	for _, r := range reqs {
		if r.ModelID != bedrock.TitanEmbedV2 || r.Dimensions != 256 || !r.Normalize || r.InputText == "" {
			t.Errorf("request %+v, want model %s, 256 dimensions, normalized, a text", r, bedrock.TitanEmbedV2)
		}
	}
}

// TestEmbedderErrors: the model's refusal is an error, bad dimensions and
// texts are refused before any call.
func TestEmbedderErrors(t *testing.T) {
	srv := bedrocktest.NewEmbed(wordVectors)
	defer srv.Close()
	if _, err := bedrock.NewEmbedder(srv.Client(), bedrock.TitanEmbedV2, 300); err == nil || !strings.Contains(err.Error(), "256, 512 or 1024") {
		t.Errorf("300 dimensions: %v, want an error naming the choices", err)
	}
	emb, err := bedrock.NewEmbedder(srv.Client(), "unknown-model", 512)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := emb.Embed(t.Context(), []string{"  "}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("an empty text: %v, want an error saying so", err)
	}
	if _, err := emb.Embed(t.Context(), []string{strings.Repeat("x", 50_001)}); err == nil || !strings.Contains(err.Error(), "at most 50000") {
		t.Errorf("a text of 50,001 characters: %v, want an error saying the most", err)
	}
	if len(srv.Requests()) != 0 {
		t.Errorf("refused texts made %d calls", len(srv.Requests()))
	}
	bad := bedrocktest.NewEmbed(func(string, int) []float32 { return []float32{1, 2} })
	defer bad.Close()
	emb, _ = bedrock.NewEmbedder(bad.Client(), bedrock.TitanEmbedV2, 256)
	if _, err := emb.Embed(t.Context(), []string{"tea"}); err == nil || !strings.Contains(err.Error(), "2 dimensions") {
		t.Errorf("a vector of the wrong size: %v, want an error saying so", err)
	}
}
