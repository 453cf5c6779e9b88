/**
 * Matching in time linear in the text for all matches together: RE2 patterns someone else wrote
 * ({@link allMatches}) and the tag segments this project extracts ({@link tagSegments}).
 */
export { allMatches, type SearchWork } from './all-matches.ts'
export { lastClosingTagEnd, tagSegments } from './tags.ts'
