// An MCP transport over any duplex byte stream (the SDK's own stdio
// transport spawns its process itself; here the process is the sandbox's).
// Framing is the SDK's: one JSON-RPC message per line.

import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';

export class StreamTransport {
  #stream;
  #buffer = new ReadBuffer();
  #started = false;

  constructor(stream) {
    this.#stream = stream;
  }

  async start() {
    if (this.#started) throw new Error('StreamTransport already started');
    this.#started = true;
    this.#stream.on('data', (chunk) => {
      this.#buffer.append(chunk);
      for (;;) {
        let message;
        try {
          message = this.#buffer.readMessage();
        } catch (e) {
          this.onerror?.(e);
          continue;
        }
        if (message === null) break;
        this.onmessage?.(message);
      }
    });
    this.#stream.on('error', (e) => this.onerror?.(e));
    this.#stream.on('close', () => this.onclose?.());
  }

  async send(message) {
    const data = serializeMessage(message);
    if (!this.#stream.write(data)) {
      await new Promise((resolve) => this.#stream.once('drain', resolve));
    }
  }

  async close() {
    this.#stream.end();
    this.#buffer.clear();
  }
}
