-- sandbox.data.hf_models: the Hugging Face Hub repositories the sandbox's
-- simulated downloads know (sandbox.k8s.programs.hf_download): each with
-- the commit its main branch points at, whether it is gated (a token is
-- needed), and its files as `hf download` fetches them, with their sizes
-- in bytes as the Hub lists them. Small text files get generated content of
-- that size; big ones are kept as sized objects.
return {
  ["Qwen/Qwen2.5-0.5B-Instruct"] = {
    sha = "7ae557604adf67be50417f59c2c2f167def9a775", gated = false, license = "apache-2.0",
    config = { architectures = { "Qwen2ForCausalLM" }, model_type = "qwen2", hidden_size = 896,
      num_hidden_layers = 24, num_attention_heads = 14, vocab_size = 151936, torch_dtype = "bfloat16" },
    files = {
      { ".gitattributes", 1519 }, { "LICENSE", 11343 }, { "README.md", 4917 }, { "config.json", 659 },
      { "generation_config.json", 242 }, { "merges.txt", 1671839 }, { "model.safetensors", 988097824 },
      { "tokenizer.json", 7031645 }, { "tokenizer_config.json", 7305 }, { "vocab.json", 2776833 },
    },
  },
  ["Qwen/Qwen3-0.6B"] = {
    sha = "c1899de289a04d12100db370d81485cdf75e47ca", gated = false, license = "apache-2.0",
    config = { architectures = { "Qwen3ForCausalLM" }, model_type = "qwen3", hidden_size = 1024,
      num_hidden_layers = 28, num_attention_heads = 16, vocab_size = 151936, torch_dtype = "bfloat16" },
    files = {
      { ".gitattributes", 1570 }, { "LICENSE", 11343 }, { "README.md", 13963 }, { "config.json", 726 },
      { "generation_config.json", 239 }, { "merges.txt", 1671853 }, { "model.safetensors", 1503300328 },
      { "tokenizer.json", 11422654 }, { "tokenizer_config.json", 9732 }, { "vocab.json", 2776833 },
    },
  },
  ["meta-llama/Llama-3.2-1B"] = {
    sha = "4e20de362430cd3b72f300e6b0f18e50e7166e08", gated = true, license = "llama3.2",
    config = { architectures = { "LlamaForCausalLM" }, model_type = "llama", hidden_size = 2048,
      num_hidden_layers = 16, num_attention_heads = 32, vocab_size = 128256, torch_dtype = "bfloat16" },
    files = {
      { ".gitattributes", 1519 }, { "LICENSE.txt", 7712 }, { "README.md", 41742 }, { "USE_POLICY.md", 6021 },
      { "config.json", 843 }, { "generation_config.json", 185 }, { "model.safetensors", 2471645608 },
      { "original/consolidated.00.pth", 2471677246 }, { "original/params.json", 220 },
      { "original/tokenizer.model", 2183982 }, { "special_tokens_map.json", 301 }, { "tokenizer.json", 9085657 },
      { "tokenizer_config.json", 50500 },
    },
  },
  ["TinyLlama/TinyLlama-1.1B-Chat-v1.0"] = {
    sha = "fe8a4ea1ffedaf415f4da2f062534de366a451e6", gated = false, license = "apache-2.0",
    config = { architectures = { "LlamaForCausalLM" }, model_type = "llama", hidden_size = 2048,
      num_hidden_layers = 22, num_attention_heads = 32, vocab_size = 32000, torch_dtype = "bfloat16" },
    files = {
      { ".gitattributes", 1519 }, { "README.md", 3196 }, { "config.json", 608 }, { "eval_results.json", 566 },
      { "generation_config.json", 124 }, { "model.safetensors", 2200119864 }, { "special_tokens_map.json", 551 },
      { "tokenizer.json", 1842767 }, { "tokenizer.model", 499723 }, { "tokenizer_config.json", 1289 },
    },
  },
  ["openai-community/gpt2"] = {
    sha = "607a30d783dfa663caf39e06633721c8d4cfcd7e", gated = false, license = "mit",
    config = { architectures = { "GPT2LMHeadModel" }, model_type = "gpt2", n_embd = 768, n_layer = 12,
      n_head = 12, vocab_size = 50257 },
    files = {
      { ".gitattributes", 445 }, { "README.md", 8092 }, { "config.json", 665 }, { "flax_model.msgpack", 497764120 },
      { "generation_config.json", 124 }, { "merges.txt", 456318 }, { "model.safetensors", 548105171 },
      { "pytorch_model.bin", 548118077 }, { "rust_model.ot", 702517648 }, { "tf_model.h5", 497933648 },
      { "tokenizer.json", 1355256 }, { "tokenizer_config.json", 26 }, { "vocab.json", 1042301 },
    },
  },
}
