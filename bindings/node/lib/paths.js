'use strict';
// Where scripts/build.js puts what it builds.

const path = require('node:path');

const build = path.resolve(__dirname, '..', 'build');

module.exports = Object.freeze({
  addon: path.join(build, 'node', 'maelys_executor.node'),
  helper: path.join(build, 'bin', 'maelys-executor-helper'),
  warden: path.join(build, 'bin', 'maelys-warden'),
});
