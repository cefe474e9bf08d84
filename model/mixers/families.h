// The mixer families, one line each: LINEA_MIXER_FAMILY(folder) names the folder
// model/mixers/<folder>/, which defines `const MixerFamily& <folder>_family()`. The order is that of
// mixer_names() (and so of help texts and error messages).
LINEA_MIXER_FAMILY(delta_rule)
LINEA_MIXER_FAMILY(attention)
