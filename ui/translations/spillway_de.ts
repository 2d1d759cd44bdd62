<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="de_DE">
<context>
    <name>QObject</name>
    <message>
        <source>Precise</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Balanced</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Creative</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>mean KL %1, top-1 agreement %2%</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>, perplexity %1 → %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The neuron cache is for ReLU models; this model&apos;s FFN is SwiGLU: off.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This model stores no activation predictors (compress it with the sparse preset): exact mode.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This model records no activity frequencies (compress it with the sparse preset): cold neurons are shipped.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>What this machine can run (8-bit weights, rough estimates from the measured speeds):</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>fits in RAM</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 streamed from the SSD each token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>top-1 agreement %1% (the bar: %2%)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>perplexity ×%1 (the bar: ×%2)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>default</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>variant %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>compute on %1 → %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>device budget %1 → %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>RAM budget %1 → %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>context %1 → %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>KV cache %1 → %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>neuron cache</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>prefetch %1 → %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>threads %1 → %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 → %2 tokens/s</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 %2 → %3</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>on the device</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>in RAM</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>SSD per token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>KV cache</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Last change (%1): %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>trained (%1)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 B parameters, %2 B active per token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 B parameters</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>• %1 (%2, %3): %4, about %5 tokens/s</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui</name>
    <message>
        <source>No spans recorded yet</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1% of each token waits on SSD reads</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1% of each token waits on host→device copies</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1% of each token waits on decompression</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1% of each token is CPU compute</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1% of each token is device compute</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1% of each token is stalls and idle gaps: no stage was busy</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::BottleneckView</name>
    <message>
        <source>layer %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>100.00 ms/tok · pred 100.00</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>layer %1 · hit rate %2% (%3 of %4 active neurons resident) · %5 loaded per token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> (predicted %1)</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source> · %n span(s) lost: the trace ring overflowed</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source>%1%</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 ms/tok</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> · pred %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>token %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>L%1 %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>neuron cache</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>hit %1% · %2/tok</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>L%1 %2%</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Waiting for spans from the engine …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No trace loaded</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Bottleneck timeline</source>
        <translation>Engpass-Zeitleiste</translation>
    </message>
    <message>
        <source>CPU compute</source>
        <translation>CPU-Berechnung</translation>
    </message>
    <message>
        <source>CPU beside GPU</source>
        <translation>CPU neben GPU</translation>
    </message>
    <message numerus="yes">
        <source> · %n token(s), %1 ms/token in the engine&apos;s spans</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source>, %1 ms/token overall (%2 tokens/s)</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>Last reply over the network: time to first token %1 ms, %2 tokens/s (%n token(s))</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source>Compute is remote: %1 runs the model; its transfers and compute are on that machine</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No reply from it yet</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The model runs on %1: nothing moves or computes on this machine.
The header shows each reply&apos;s time to first token and tokens/s over the network.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export</source>
        <translation>Exportieren</translation>
    </message>
    <message>
        <source>Save what the timeline shows: a Chrome trace (Perfetto, chrome://tracing) or a PNG</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Chrome trace (JSON)…</source>
        <translation>Chrome-Trace (JSON) …</translation>
    </message>
    <message>
        <source>Picture (PNG)…</source>
        <translation>Bild (PNG) …</translation>
    </message>
    <message>
        <source> · paused: double-click to follow the reply</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source> · paused (%n new span(s) waiting): double-click to follow the reply</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source>whole layer</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>whole prompt layer (a batch of prompt tokens)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> at %1 GB/s</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>layer %1 · its experts are not served by the cache (resident on the device or in RAM)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>layer %1 · hit rate %2% (%3 of %4 chosen experts in a slot) · %5 experts missed per token · %6 read per token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>expert cache</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>hit %1% · %2 missed/tok</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>L%1 resident</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 missed</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::ChatController</name>
    <message>
        <source>%1 (the model loaded before goes on answering)</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::ChatStore</name>
    <message>
        <source>the chat history is not open</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>cannot open the chat history: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>unknown message role &apos;%1&apos;</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>unknown version kind &apos;%1&apos;</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>cannot write %1: %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>cannot read %1: %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1: conversation %2 of %3 not imported: %4</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 is not a chat export (Spillway&apos;s, or a list of messages): %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> (imported)</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::ChatWindow</name>
    <message>
        <source>Loading …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loading %1 …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Spillway</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>New chat</source>
        <translation>Neuer Chat</translation>
    </message>
    <message>
        <source>Search conversations</source>
        <translation>Unterhaltungen durchsuchen</translation>
    </message>
    <message>
        <source>Chats</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Models</source>
        <translation>Modelle</translation>
    </message>
    <message>
        <source>Tuning</source>
        <translation>Abstimmung</translation>
    </message>
    <message>
        <source>Model</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The model that answers; another loads in the background</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model:</source>
        <translation>Modell:</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>Einstellungen</translation>
    </message>
    <message>
        <source>This chat&apos;s system prompt, length and sampling</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Editing your message: Send resends it, Escape cancels.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Type a prompt and press Enter (Shift+Enter for a new line)</source>
        <translation>Prompt eingeben und Enter drücken (Umschalt+Enter für eine neue Zeile)</translation>
    </message>
    <message>
        <source>Send</source>
        <translation>Senden</translation>
    </message>
    <message>
        <source>Stop</source>
        <translation>Stopp</translation>
    </message>
    <message>
        <source>Bottleneck</source>
        <translation>Engpass</translation>
    </message>
    <message>
        <source>Export Chrome trace…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export PNG…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Chrome trace (*.json)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>PNG image (*.png)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Wrote %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Tokens of the context this chat holds (prompt and replies); when it is full, the oldest turns leave (the system prompt stays)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;File</source>
        <translation>&amp;Datei</translation>
    </message>
    <message>
        <source>&amp;New chat</source>
        <translation>&amp;Neuer Chat</translation>
    </message>
    <message>
        <source>&amp;Import chats…</source>
        <translation>Chats &amp;importieren…</translation>
    </message>
    <message>
        <source>Import chats</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;Export this chat</source>
        <translation>Diesen Chat &amp;exportieren</translation>
    </message>
    <message>
        <source>As &amp;Markdown…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>As &amp;JSON…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export &amp;all chats</source>
        <translation>&amp;Alle Chats exportieren</translation>
    </message>
    <message>
        <source>&amp;Quit</source>
        <translation>&amp;Beenden</translation>
    </message>
    <message>
        <source>&amp;View</source>
        <translation>&amp;Ansicht</translation>
    </message>
    <message>
        <source>&amp;Chats</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;Models</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;Tuning</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;Search chats</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;Prompt</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This chat is not stored yet: send a message first</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export all chats</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export this chat</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>JSON (*.json)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Markdown (*.md)</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>Exported %n chat(s) to %1</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>Imported %n chat(s)</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source>&quot;%1&quot; is a built-in preset: choose another name</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> — neuron cache: hit rate %1%, %2 per token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Context %1 / %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Edit and resend</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>Resending this message removes the %n message(s) after it.</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source>%1 — generating …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Rename…</source>
        <translation>Umbenennen…</translation>
    </message>
    <message>
        <source>Delete</source>
        <translation>Löschen</translation>
    </message>
    <message>
        <source>Rename conversation</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Title:</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Delete chat</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Delete &quot;%1&quot; and all its messages? This cannot be undone.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Error: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> — ended: the context is full</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> — stopped</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 — %2 tokens, %3 tokens/s, first token %4 ms</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Done: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Compression cancelled; nothing was written.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Compression failed.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>A reply is being written: stop it first, then pick %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loading %1 … (%2 answers until it is ready)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Conversations</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Conversation</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Prompt</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Status</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Context used</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>A reply is being written: stop it (Escape) to open another chat</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model loading</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Cancel loading</source>
        <translation>Laden abbrechen</translation>
    </message>
    <message>
        <source>Stop loading this model; the one before goes on answering</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Views</source>
        <translation>Ansichten</translation>
    </message>
    <message>
        <source>Your conversations (Ctrl+1)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The model library: add, compress, chat with a model (Ctrl+2)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Where the weights go and how fast it runs here (Ctrl+3)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loading %1 … %2 of %3 of weights</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> — unloaded %1, which freed %2 of device memory</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loading cancelled; %1 answers</source>
        <translation>Laden abgebrochen; %1 antwortet</translation>
    </message>
    <message>
        <source>Loading cancelled; no model is loaded</source>
        <translation>Laden abgebrochen; kein Modell geladen</translation>
    </message>
    <message>
        <source>%1 is below the quality bar (%2): its replies may be wrong or garbled</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Add a llama2.c checkpoint</source>
        <translation>llama2.c-Checkpoint hinzufügen</translation>
    </message>
    <message>
        <source>%1 is a llama2.c checkpoint. The format does not record the model&apos;s activation function or its tokenizer: with the wrong ones it runs, but writes gibberish.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Architecture</source>
        <translation>Architektur</translation>
    </message>
    <message>
        <source>llama: SiLU (SwiGLU) FFNs, as Karpathy&apos;s TinyStories models</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>relu-llama: shifted-ReLU FFNs, as the thesis&apos; sparse models</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Tokenizer file</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>tokenizer.bin (or a decode&lt;vocab&gt;.tok table)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Browse…</source>
        <translation>Durchsuchen …</translation>
    </message>
    <message>
        <source>No tokenizer lies beside it: choose the one it was trained with.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Found beside it; choose another if it was trained with another.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Tokenizer</source>
        <translation>Tokenizer</translation>
    </message>
    <message>
        <source>Add to the library</source>
        <translation>Zur Bibliothek hinzufügen</translation>
    </message>
    <message>
        <source>The checkpoint&apos;s tokenizer</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Tokenizers (*.bin *.tok);;All files (*)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;Server</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The server stopped: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Context %1 tokens</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>Added %n model(s) of %1: choose one and Chat with this model</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source>the API key could not be kept on disk (%1); it is used until Spillway quits</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Discover</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Find models on Hugging Face, judged for this machine before you download (Ctrl+4)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Chats (*.json)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;Discover</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 could not be opened: %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 — %2 answers instead</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> — ended: the reply length (%1 tokens); Continue goes on</source>
        <translation> — beendet: die Antwortlänge (%1 Tokens); „Weiter“ setzt sie fort</translation>
    </message>
    <message>
        <source>Spillway timeline %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export Chrome trace</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export PNG</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Spillway chats</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The applied plan runs %1: it answers from now on (the model picker shows it)</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::ConversationListModel</name>
    <message>
        <source>(untitled)</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::DiscoverController</name>
    <message>
        <source>Checked and added to the library</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Downloaded and checked, but not added to the library: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Checked; adding it to the library …</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::DiscoverPanel</name>
    <message>
        <source>Search Hugging Face for GGUF models (e.g. qwen 7b, llama 3.1 8b instruct)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Search models</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Search</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Access token…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>A Hugging Face access token, for gated repositories (Meta&apos;s Llama, Google&apos;s Gemma, …)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Search result</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Repositories found</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Search, then pick a repository: each of its GGUF files is judged for this machine from its header alone, before anything is downloaded.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>File</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Size</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Device</source>
        <translation type="unfinished">Gerät</translation>
    </message>
    <message>
        <source>RAM</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>SSD</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Predicted</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Verdict</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Files with the planner&apos;s verdict</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Bytes in the computing device&apos;s memory (the GPU&apos;s; on the CPU device, RAM it computes from)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Bytes in RAM, sent to the device as they are needed</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Bytes left on the SSD (the token embedding table stays there: a token reads one row of it)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The planner&apos;s prediction for this machine, as measured</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> tokens/s</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The recommendation: the largest file predicted at least this fast here</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Speed the recommendation must reach</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Download</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Recommend the largest at or above</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&lt;b&gt;Downloads&lt;/b&gt; — resumable, each file checked against its SHA-256 before it joins the library</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Progress</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Status</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Downloads</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Pause</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Resume</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation type="unfinished">Abbrechen</translation>
    </message>
    <message>
        <source>Stop and delete what was downloaded of it</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Clear finished</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Discover messages</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Searching %1 …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No GGUF repositories match &apos;%1&apos; on %2.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The search for &apos;%1&apos; failed: %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No results: the search got no answer (see above)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Access token ✓</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 downloads · %2 likes</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> · gated: needs an access token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> — reading each file&apos;s header and planning it for this machine …</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source> — no GGUF files (%n other file(s)): a safetensors repository converts with `spillway-cli convert` once downloaded</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source> — recommended here: &lt;b&gt;%1&lt;/b&gt;</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source> (%n parts)</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source>%1 tokens/s</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Fits in memory</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Streams weights from the SSD</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>★ Recommended · </source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No verdict: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Reading its header …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Judged once the machine is measured</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 of %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Queued</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Downloading · %1/s · %2 s left</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Downloading …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Paused (resumes where it stopped)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Failed: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Done</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Hugging Face access token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Gated repositories (Llama, Gemma, …) need a token of an account that accepted their terms: huggingface.co → Settings → Access Tokens (read). Without one here, the token huggingface-cli keeps is used, if any.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Token:</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Remember it on this computer (readable by you alone)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The token is used for this Hub from now on.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The token is forgotten.</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::GenerationPanel</name>
    <message>
        <source>Preset</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>System prompt</source>
        <translation>Systemprompt</translation>
    </message>
    <message>
        <source>System prompt (how the model should answer in this chat)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Max tokens</source>
        <translation>Max. Tokens</translation>
    </message>
    <message>
        <source>until the end</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>0: until the model ends its turn or the context is full</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Temperature</source>
        <translation>Temperatur</translation>
    </message>
    <message>
        <source>0: always the most likely token (greedy)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Top-k</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>off</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Top-p</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Min-p</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Repetition penalty</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Seed</source>
        <translation>Seed</translation>
    </message>
    <message>
        <source>random</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Save as preset…</source>
        <translation>Als Voreinstellung speichern…</translation>
    </message>
    <message>
        <source>Save as preset</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Name:</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>(this chat&apos;s own)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This model has no chat template: it continues your text and does not read a system prompt.</source>
        <translation>Dieses Modell hat keine Chat-Vorlage: Es setzt Ihren Text fort und liest keinen Systemprompt.</translation>
    </message>
    <message>
        <source>%1 (a base model&apos;s default)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>0: %1 tokens, as a base model never ends a turn itself (Continue goes on)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Think before answering</source>
        <translation>Vor der Antwort nachdenken</translation>
    </message>
    <message>
        <source>The model&apos;s template takes a thinking switch (enable_thinking)</source>
        <translation>Die Vorlage des Modells kennt einen Denk-Schalter (enable_thinking)</translation>
    </message>
    <message>
        <source>Reasoning effort</source>
        <translation>Denkaufwand</translation>
    </message>
    <message>
        <source>the model&apos;s default</source>
        <translation>Vorgabe des Modells</translation>
    </message>
    <message>
        <source>low</source>
        <translation>niedrig</translation>
    </message>
    <message>
        <source>medium</source>
        <translation>mittel</translation>
    </message>
    <message>
        <source>high</source>
        <translation>hoch</translation>
    </message>
    <message>
        <source>How hard the model reasons (its template&apos;s reasoning_effort)</source>
        <translation>Wie gründlich das Modell nachdenkt (reasoning_effort seiner Vorlage)</translation>
    </message>
    <message>
        <source>Thinking budget</source>
        <translation>Denkbudget</translation>
    </message>
    <message>
        <source>no limit</source>
        <translation>unbegrenzt</translation>
    </message>
    <message>
        <source> tokens</source>
        <translation> Token</translation>
    </message>
    <message>
        <source>The most tokens the model thinks for; then its thinking is closed and it answers (0: it answers at once)</source>
        <translation>Höchstens so viele Token denkt das Modell nach; dann wird sein Nachdenken beendet und es antwortet (0: sofort)</translation>
    </message>
    <message>
        <source>Thinking</source>
        <translation>Nachdenken</translation>
    </message>
</context>
<context>
    <name>spillway::ui::GenerationWorker</name>
    <message>
        <source>no model is loaded</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>The conversation is longer than the context: its %n oldest message(s) are left out of what the model sees (the system prompt stays).</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source> — its chat template is not used (%1); prompts are continued</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>no model or plan to apply</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>, neuron cache %1 per layer (%2; cold neurons on the CPU in %3 of %4 layers)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 — plan applied: predicted %2 tokens/s, KV cache %3%4</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>the model answering runs on a remote endpoint: plans are for local models</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 no longer lists the model %2 (it lists: %3)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>, …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 (remote, %2)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>a remote model cannot go on with a reply: regenerate it, or ask for more in a new message</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>the server serves a local model; the model answering now is remote</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::LibraryController</name>
    <message>
        <source>Compressing %1 (%2) …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Done: %1; predicted %2 → %3 tokens/s on this machine</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> — below the quality bar (%1): its replies may be wrong or garbled</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&apos;%1&apos; is not the address of an OpenAI-compatible API (http://host:port/v1)</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::LibraryPanel</name>
    <message>
        <source>Add model…</source>
        <translation>Modell hinzufügen…</translation>
    </message>
    <message>
        <source>Or drop a GGUF file or a package folder anywhere on the window</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Chat with this model</source>
        <translation>Mit diesem Modell chatten</translation>
    </message>
    <message>
        <source>Load the selected model (the one answering now goes on until it is ready)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Compress</source>
        <translation>Komprimieren</translation>
    </message>
    <message>
        <source>fast: int8 (Q8_0), about half the size, nearly lossless</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>smallest: 50% pruned, bitmap sparse int8</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>sparse: for the neuron cache (ReLU models): bundles and activation predictors</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Presets</source>
        <translation>Voreinstellungen</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>Abbrechen</translation>
    </message>
    <message>
        <source>Add a model</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Models (*.gguf manifest.json config.json *.safetensors *.bin);;All files (*)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1: %2%</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>, %1 of %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>, about %1 s left</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model library</source>
        <translation>Modellbibliothek</translation>
    </message>
    <message>
        <source>Compression result</source>
        <translation>Ergebnis der Kompression</translation>
    </message>
    <message>
        <source>Remove from library (the files stay)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Drop a GGUF file or a package folder anywhere on the window</source>
        <translation>Ziehen Sie eine GGUF-Datei oder einen Paketordner irgendwo auf das Fenster</translation>
    </message>
    <message>
        <source>Selected model</source>
        <translation>Ausgewähltes Modell</translation>
    </message>
    <message>
        <source>balanced: 50% pruned (Wanda), bitmap sparse fp16</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> — measured here: passes the quality bar</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> — measured here: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> (recommended)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Compress (%1)</source>
        <translation>Komprimieren (%1)</translation>
    </message>
    <message>
        <source>Compress the selected model into a package with the recommended preset, %1: the smallest whose measured quality on this model passes the bar (Presets offers the others)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Select a model</source>
        <translation>Modell auswählen</translation>
    </message>
    <message>
        <source>No model yet: add one</source>
        <translation>Noch kein Modell: fügen Sie eines hinzu</translation>
    </message>
    <message>
        <source>Add endpoint…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Chat with the models of an OpenAI-compatible server (another Spillway, llama.cpp, Ollama, vLLM) as with a local file</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Add a remote endpoint</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>An OpenAI-compatible server (another Spillway&apos;s serve, llama.cpp&apos;s server, Ollama, vLLM, a hosted API): the models it lists join the library, and chatting with one runs on that machine.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Address</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>none</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>API key</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Remember the key on this computer (in a file only you can read)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Unchecked, the key is kept only until Spillway quits. It is never written to the history, the logs or an export.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Address:</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>API key:</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Add</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Why the model was not added</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Dismiss</source>
        <translation>Ausblenden</translation>
    </message>
    <message>
        <source>Not added: %1</source>
        <translation>Nicht hinzugefügt: %1</translation>
    </message>
</context>
<context>
    <name>spillway::ui::ModelCatalogModel</name>
    <message>
        <source> · ~%1 tokens/s here</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&lt;br&gt;from %1 (%2 → %3)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Predicted here: planning …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>⚠ Below the quality bar: %1. Its replies may be wrong or garbled; the &quot;fast&quot; preset keeps the model&apos;s quality.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 · remote · %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&lt;b&gt;%1&lt;/b&gt;&lt;br&gt;Remote model · OpenAI-compatible endpoint&lt;br&gt;%2&lt;br&gt;&lt;i&gt;Computed on %3: nothing is loaded or planned here; the visualizer shows the time to first token and tokens/s over the network&lt;/i&gt;</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::ModelWorker</name>
    <message>
        <source>unknown preset &apos;%1&apos;</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>weights %1 → %2 (%3%)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>; mean KL %1, top-1 agreement %2%</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 answers but lists no model</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::ServerControl</name>
    <message>
        <source>Server &amp;settings…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Server</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;Serve the model over the OpenAI API (%1:%2)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Editors, scripts and Open WebUI on this computer can use the model the window has loaded, at http://%1:%2/v1 (not reachable from other computers)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Serving %1 at %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>OpenAI-compatible API: %1/chat/completions, %1/models; metrics at %2/metrics</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Server starting …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Server waits for a local model</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Server settings</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>any free port</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Conversations the server keeps at once, each with its own context (memory for each)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Port on 127.0.0.1:</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Conversation slots:</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Only programs on this computer can connect. To serve other computers, run spillway-cli serve with --host and an API key.</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::TranscriptView</name>
    <message>
        <source>%1 tokens/s · first token %2 ms</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>You:</source>
        <translation>Sie:</translation>
    </message>
    <message>
        <source>Model:</source>
        <translation>Modell:</translation>
    </message>
    <message>
        <source>Edit and resend this message</source>
        <translation>Diese Nachricht bearbeiten und erneut senden</translation>
    </message>
    <message>
        <source>Copy this reply</source>
        <translation>Diese Antwort kopieren</translation>
    </message>
    <message>
        <source>Hide the model&apos;s reasoning</source>
        <translation>Die Überlegung des Modells ausblenden</translation>
    </message>
    <message>
        <source>Show the model&apos;s reasoning</source>
        <translation>Die Überlegung des Modells zeigen</translation>
    </message>
    <message>
        <source>Regenerate: write this reply again</source>
        <translation>Neu erzeugen: diese Antwort noch einmal schreiben</translation>
    </message>
    <message>
        <source>Continue: the reply goes on from where it ended</source>
        <translation>Weiter: Die Antwort geht dort weiter, wo sie endete</translation>
    </message>
    <message>
        <source>Previous version</source>
        <translation>Vorherige Version</translation>
    </message>
    <message>
        <source>Next version</source>
        <translation>Nächste Version</translation>
    </message>
    <message>
        <source>Thinking…</source>
        <translation>Denkt nach…</translation>
    </message>
    <message>
        <source>1 word</source>
        <translation>1 Wort</translation>
    </message>
    <message>
        <source>%1 words</source>
        <translation>%1 Wörter</translation>
    </message>
    <message>
        <source>Reasoning · %1</source>
        <translation>Überlegung · %1</translation>
    </message>
    <message>
        <source>under 0.1 s</source>
        <translation>unter 0,1 s</translation>
    </message>
    <message>
        <source>%1 s</source>
        <translation>%1 s</translation>
    </message>
    <message>
        <source>%1 min %2 s</source>
        <translation>%1 min %2 s</translation>
    </message>
    <message>
        <source>Thought for %1 · %2</source>
        <translation>Nachgedacht: %1 · %2</translation>
    </message>
</context>
<context>
    <name>spillway::ui::TuningPanel</name>
    <message>
        <source>Measuring this machine …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>default</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Device memory for weights, KV cache and streaming slots (default: all free)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Pinned RAM for weights and staging (default: half the available RAM)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>trained (≤ 4096)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>fp32 (exact)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>fp16 (half the memory)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>int8 (a quarter)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>KV cache precision: smaller leaves more device memory for weights</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>off</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> neurons per layer</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>ReLU models: compute each FFN over its active neurons only, through a cache of this many neurons per layer that loads only the ones it lacks each token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>exact (the gate decides)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>predicted (approximate, fewer bytes)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Predicted mode trusts the model&apos;s stored activation predictors and reads no FFN weight of a neuron they leave out</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>automatic (the faster, per layer)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>ship them to the device</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>compute them on the CPU</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Neurons the cache lacks: shipped to its slots, or computed on the CPU where they lie while the slots keep the hottest neurons for good (needs a package with predictors)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>automatic (the fastest usable)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>CPU</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>CUDA (NVIDIA)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Vulkan</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Which device computes: automatic takes a CUDA GPU, else a Vulkan GPU, else the CPU</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>one per core</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model variant</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Compute on</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Device budget</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>RAM budget</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Context</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>KV cache</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Neuron cache</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Neuron selection</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Cold neurons</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Prefetch depth</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>CPU threads</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Apply</source>
        <translation>Anwenden</translation>
    </message>
    <message>
        <source>No plan: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> (%1)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> (original, %1)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>device</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>RAM</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>SSD</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Which compressed version of the model to run (compress it in the Models view)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Placement of the weights</source>
        <translation>Verteilung der Gewichte</translation>
    </message>
    <message>
        <source>Predicted speed</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Device</source>
        <translation>Gerät</translation>
    </message>
    <message>
        <source>What the last change did</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 of the weights (%2), resident; KV cache %3</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 (%2) in pinned RAM, copied to the device as each layer runs</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 (%2) stay on the SSD; %3 read per token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 tokens/s predicted</source>
        <translation>%1 Token/s vorhergesagt</translation>
    </message>
    <message>
        <source>Time per token, lane by lane</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Longer than the %1 tokens the model was trained on: replies past them tend to lose the thread (the memory is planned as asked)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>device %1 · RAM %2 · SSD %3 read per token
KV cache %4</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> · recurrent state %1 (linear-attention layers: the same at any context length)</source>
        <translation> · rekurrenter Zustand %1 (Schichten mit linearer Attention: bei jeder Kontextlänge gleich)</translation>
    </message>
    <message>
        <source>SSD reads</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Host→device copies</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Decompression</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Device compute</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>CPU compute</source>
        <translation type="unfinished">CPU-Berechnung</translation>
    </message>
    <message>
        <source>Per token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>probe alone</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>calibrated</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>predicted</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>last run</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> probe %1,</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> predicted %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>, last run %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Last run: %1 tokens with this placement, %2 tokens/s measured against %3 predicted then.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The last reply ran with another placement: apply this one and chat to measure it.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Measured figures appear here after a reply of 16 tokens or more with an applied plan.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> · answers now</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::TuningWorker</name>
    <message>
        <source>CPU: %1, %2 cores, RAM %3 (%4 free), read %5</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Disk: %1, %2 free, sequential direct reads %3 (%4)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Device %1: %2, %3 memory, host→device %4</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Backend %1 not usable: %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model: %1, %2 of weights</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>the tuning panel is not ready yet</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>unknown KV cache type &apos;%1&apos; (f32, f16 or q8)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>no %1 device was found on this machine</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 is not usable here: %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Cannot plan: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Does not fit: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>device %1%</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>RAM %1%</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>SSD %1%</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Predicted here: %1 tokens/s (%2)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Experts: on the device in %1 of %2 layers, streamed whole in the others.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Experts: on the device in %1 of %2 layers, through the expert cache in %3 (%4 slots each on the device, %5 experts in RAM in all): %6 % of the choices expected in slots, %7 % from RAM; routing %8.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 to %2 (by the routing)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Calibrated by one run of this kind on this machine; the probe&apos;s figures alone predict %1 tokens/s.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Calibrated by %1 runs of this kind on this machine; the probe&apos;s figures alone predict %2 tokens/s.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The machine was busy while it was measured (%1): it is measured again once it is quiet.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The hardware profile looks wrong: %1</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>spillway::ui::WelcomePage</name>
    <message>
        <source>&lt;h2&gt;Welcome to Spillway&lt;/h2&gt;&lt;p&gt;Spillway runs language models bigger than your GPU&apos;s memory by keeping each weight where it is cheapest to read: device memory, RAM or the SSD. First it measures this machine.&lt;/p&gt;</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Measuring this machine …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loading the demo model …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Start chatting</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Measured.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Measuring: %1 …</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This machine:</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Ready to chat: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This machine</source>
        <translation>Dieser Rechner</translation>
    </message>
    <message>
        <source>What it can run</source>
        <translation>Was er ausführen kann</translation>
    </message>
    <message>
        <source>Drop a GGUF model anywhere on the window to add it; the Tuning view shows where its weights would live and how fast it would run.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The measurement failed: %1. Chatting works all the same; the Tuning view needs the measurement for its predictions.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loaded: %1. You can start chatting now; the measurement (%2%) goes on beside it.</source>
        <translation type="unfinished"></translation>
    </message>
</context>
</TS>
