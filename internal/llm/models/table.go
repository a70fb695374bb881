package models

import (
	"strings"

	"github.com/agentbox/agentbox/internal/llm"
)

// Known describes the models whose names start with Prefix.
type Known struct {
	Prefix        string
	ContextWindow int // tokens
	MaxOutput     int // tokens
	Price         llm.Price
}

// Conservative values for a model the table does not know: a small window
// (an agent that overruns a local server's window gets its prompt cut
// silently) and no price.
const (
	UnknownContextWindow = 32_768
	UnknownMaxOutput     = 4_096
)

// Prices in US dollars per million tokens, as the providers list them.
// Anthropic's cache writes (5-minute TTL) cost 1.25 times the input price
// and reads a tenth of it. OpenAI charges no premium for writing its cache,
// so a write is priced as input. Open models cost nothing when they run
// locally; behind a paid service (OpenRouter) their price is not known here.
var table = []Known{
	// Anthropic: Opus 4.5 and later cost a third of Opus 4 and 4.1.
	{"claude-opus-4", 200_000, 64_000, anthropicPrice(5, 25)},
	{"claude-opus-4-0", 200_000, 32_000, anthropicPrice(15, 75)},
	{"claude-opus-4-1", 200_000, 32_000, anthropicPrice(15, 75)},
	{"claude-opus-4-2025", 200_000, 32_000, anthropicPrice(15, 75)}, // claude-opus-4-20250514
	{"claude-sonnet-4", 200_000, 64_000, anthropicPrice(3, 15)},
	{"claude-3-7-sonnet", 200_000, 64_000, anthropicPrice(3, 15)},
	{"claude-3-5-sonnet", 200_000, 8_192, anthropicPrice(3, 15)},
	{"claude-haiku-4", 200_000, 64_000, anthropicPrice(1, 5)},
	{"claude-3-5-haiku", 200_000, 8_192, anthropicPrice(0.8, 4)},

	// OpenAI.
	{"gpt-5", 400_000, 128_000, openAIPrice(1.25, 10, 0.125)},
	{"gpt-5-mini", 400_000, 128_000, openAIPrice(0.25, 2, 0.025)},
	{"gpt-5-nano", 400_000, 128_000, openAIPrice(0.05, 0.4, 0.005)},
	{"gpt-4.1", 1_047_576, 32_768, openAIPrice(2, 8, 0.5)},
	{"gpt-4.1-mini", 1_047_576, 32_768, openAIPrice(0.4, 1.6, 0.1)},
	{"gpt-4.1-nano", 1_047_576, 32_768, openAIPrice(0.1, 0.4, 0.025)},
	{"gpt-4o", 128_000, 16_384, openAIPrice(2.5, 10, 1.25)},
	{"gpt-4o-mini", 128_000, 16_384, openAIPrice(0.15, 0.6, 0.075)},
	{"o3", 200_000, 100_000, openAIPrice(2, 8, 0.5)},
	{"o3-mini", 200_000, 100_000, openAIPrice(1.1, 4.4, 0.55)},
	{"o4-mini", 200_000, 100_000, openAIPrice(1.1, 4.4, 0.275)},

	// Open models, free when local. The window is what the model supports;
	// the server must be configured for it (Ollama: OLLAMA_CONTEXT_LENGTH).
	{"llama3.1", 131_072, 8_192, llm.Price{}},
	{"llama3.2", 131_072, 8_192, llm.Price{}},
	{"llama3.3", 131_072, 8_192, llm.Price{}},
	{"gpt-oss", 131_072, 16_384, llm.Price{}},
	{"qwen2.5-coder", 32_768, 8_192, llm.Price{}},
	{"qwen3-coder", 262_144, 16_384, llm.Price{}},
	{"devstral", 131_072, 8_192, llm.Price{}},
}

func anthropicPrice(in, out float64) llm.Price {
	return llm.Price{InputPerMTok: in, OutputPerMTok: out, CacheReadPerMTok: in / 10, CacheWritePerMTok: in * 1.25}
}

func openAIPrice(in, out, cached float64) llm.Price {
	return llm.Price{InputPerMTok: in, OutputPerMTok: out, CacheReadPerMTok: cached, CacheWritePerMTok: in}
}

// Lookup finds what the table knows of a model: the entry with the longest
// prefix of its name. Names are compared without case, vendor prefix
// (OpenRouter's anthropic/...), tag (Ollama's :8b) or version suffix
// (Vertex's @2025...), and with dots as dashes (claude-opus-4.1).
// Unknown models get the conservative defaults and no price.
func Lookup(name string) (Known, bool) {
	key := normalize(name)
	best, found := Known{ContextWindow: UnknownContextWindow, MaxOutput: UnknownMaxOutput}, false
	for _, k := range table {
		p := normalize(k.Prefix)
		if strings.HasPrefix(key, p) && (!found || len(p) > len(normalize(best.Prefix))) {
			best, found = k, true
		}
	}
	return best, found
}

// Table returns the well-known models, for documentation.
func Table() []Known {
	return append([]Known(nil), table...)
}

func normalize(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	name, _, _ = strings.Cut(name, ":")
	name, _, _ = strings.Cut(name, "@")
	return strings.ReplaceAll(name, ".", "-")
}
