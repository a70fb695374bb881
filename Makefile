# Developer shortcuts; scripts/ holds the real steps.
.PHONY: build test image bench doctor clean

build:
	CGO_ENABLED=0 go build -trimpath -ldflags "-X main.commit=$$(git rev-parse --short=12 HEAD 2>/dev/null)$$(git diff --quiet HEAD 2>/dev/null || echo +dirty)" -o bin/agentbox ./cmd/agentbox

test:
	./scripts/test.sh

image: build
	bin/agentbox image build

bench: build
	bin/agentbox bench

doctor: build
	bin/agentbox doctor

clean:
	rm -rf bin
