'use strict';
// Loads the addon built by scripts/build.js.

const paths = require('./paths.js');

let binding;
try {
  binding = require(paths.addon);
} catch (cause) {
  const error = new Error(
    `cannot load the Maelys Executor addon (${paths.addon}): ${cause.message}. ` +
      'Build it with `npm run build` in bindings/node.',
    { cause },
  );
  error.code = 'NOT_FOUND';
  throw error;
}

module.exports = { binding, paths };
