package bedrock

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
)

// TitanEmbedV2 is the model id of Amazon Titan Text Embeddings V2.
const TitanEmbedV2 = "amazon.titan-embed-text-v2:0"

// maxEmbedChars is the longest text Titan Text Embeddings V2 takes
// (50,000 characters, and 8,192 tokens).
const maxEmbedChars = 50_000

// Invoker is the part of *bedrockruntime.Client the Embedder uses.
type Invoker interface {
	InvokeModel(ctx context.Context, in *bedrockruntime.InvokeModelInput, opts ...func(*bedrockruntime.Options)) (*bedrockruntime.InvokeModelOutput, error)
}

// Embedder is Amazon Titan Text Embeddings V2 on Bedrock's InvokeModel, as
// a pkg/longterm Embedder. It is safe for concurrent use.
type Embedder struct {
	client  Invoker
	modelID string
	dims    int
}

// NewEmbedder returns the embedding model modelID (TitanEmbedV2, or an
// inference profile or ARN of it) served by client, returning vectors of
// dims dimensions (256, 512 or 1024; 0 means 1024), normalized.
func NewEmbedder(client Invoker, modelID string, dims int) (*Embedder, error) {
	switch dims {
	case 0:
		dims = 1024
	case 256, 512, 1024:
	default:
		return nil, fmt.Errorf("bedrock: embedding dimensions %d: Titan Text Embeddings V2 gives 256, 512 or 1024", dims)
	}
	return &Embedder{client: client, modelID: modelID, dims: dims}, nil
}

// titanRequest and titanResponse are InvokeModel's bodies for Titan Text
// Embeddings V2.
type titanRequest struct {
	InputText  string `json:"inputText"`
	Dimensions int    `json:"dimensions"`
	Normalize  bool   `json:"normalize"`
}

type titanResponse struct {
	Embedding           []float32 `json:"embedding"`
	InputTextTokenCount int       `json:"inputTextTokenCount"`
}

// embedConcurrency bounds the InvokeModel calls of one Embed in flight
// (the model embeds one text per call).
const embedConcurrency = 4

// Embed implements the Embedder of pkg/longterm: one InvokeModel call per
// text, up to 4 at a time. Errors are [agent.ModelError]s, as Generate's.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return nil, fmt.Errorf("bedrock: embed text %d: it is empty", i)
		}
		if n := utf8.RuneCountInString(t); n > maxEmbedChars {
			return nil, fmt.Errorf("bedrock: embed text %d: it is %d characters; Titan Text Embeddings V2 takes at most %d", i, n, maxEmbedChars)
		}
	}
	out := make([][]float32, len(texts))
	errs := make([]error, len(texts))
	sem := make(chan struct{}, embedConcurrency)
	var wg sync.WaitGroup
	for i, t := range texts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = e.embed(ctx, t)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("bedrock: embed text %d: %w", i, err)
		}
	}
	return out, nil
}

func (e *Embedder) embed(ctx context.Context, text string) ([]float32, error) {
	body, err := json.Marshal(titanRequest{InputText: text, Dimensions: e.dims, Normalize: true})
	if err != nil {
		return nil, err
	}
	res, err := e.client.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{
		ModelId:     aws.String(e.modelID),
		ContentType: aws.String("application/json"),
		Accept:      aws.String("application/json"),
		Body:        body,
	})
	if err != nil {
		return nil, mapError(ctx, err)
	}
	var r titanResponse
	if err := json.Unmarshal(res.Body, &r); err != nil {
		return nil, fmt.Errorf("decode the model's answer: %w", err)
	}
	if len(r.Embedding) != e.dims {
		return nil, fmt.Errorf("the model returned %d dimensions, want %d", len(r.Embedding), e.dims)
	}
	return r.Embedding, nil
}
